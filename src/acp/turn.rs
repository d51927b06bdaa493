//! `session/prompt`: one turn. The message runs; each decision the run suspends on becomes a
//! `session/request_permission`, and the client's answer decides it (or, when it decides
//! nothing, leaves it pending with a store and unapproved without one); the turn ends with the
//! stop reason of how the last run ended.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{RequestPermissionRequest, StopReason};

use crate::acp::permission::{self, Answer, Offer};
use crate::acp::slot::Slot;
use crate::acp::update::kind;
use crate::acp::{Error, session_error};
use crate::model::ModelErrorKind;
use crate::session::{PendingDecision, RunOutcome};

/// What asking about one pending decision led to.
// Returned once per answer and matched at once, as `RunOutcome` is.
#[allow(clippy::large_enum_variant)]
enum Asked {
    /// It was decided: the run carried on to this outcome.
    Decided(RunOutcome),
    /// Nothing was decided: the turn ends with this stop reason.
    Stop(StopReason),
}

/// Runs one prompt turn of `slot` with the user's `text`; the turn ends (another prompt may
/// start) however it returns.
pub(crate) async fn prompt(
    slot: Arc<Slot>,
    text: String,
    decided_by: Arc<str>,
) -> Result<StopReason, Error> {
    let stop = run(&slot, Some(text), &decided_by).await;
    slot.end_turn();
    stop
}

/// Asks again about what a loaded session waits on (a plan or tool calls left pending when the
/// last client went), as a turn without a prompt: the answer carries the run on, its updates
/// streaming as a prompt's do.
pub(crate) async fn resume(slot: Arc<Slot>, decided_by: Arc<str>) {
    if let Err(error) = run(&slot, None, &decided_by).await {
        tracing::warn!(%error, "the resumed run failed");
    }
    slot.end_turn();
}

async fn run(slot: &Slot, text: Option<String>, decided_by: &str) -> Result<StopReason, Error> {
    let mut outcome = match text {
        Some(text) => {
            let mut session = slot.session.lock().await;
            if slot.cancel_requested() {
                return Ok(StopReason::Cancelled);
            }
            session.send_message(text).await.map_err(session_error)?
        }
        None => match ask(slot, decided_by).await? {
            Asked::Decided(outcome) => outcome,
            Asked::Stop(reason) => return Ok(reason),
        },
    };
    loop {
        outcome = match outcome {
            RunOutcome::Completed { .. } => return Ok(ended(slot, StopReason::EndTurn)),
            RunOutcome::Aborted { .. } => return Ok(ended(slot, StopReason::EndTurn)),
            RunOutcome::Failed { error, .. } => {
                return match error.kind() {
                    ModelErrorKind::StepLimit | ModelErrorKind::RevisionLimit => {
                        Ok(StopReason::MaxTurnRequests)
                    }
                    _ => Err(Error::internal_error().data(error.to_string())),
                };
            }
            RunOutcome::Suspended { .. }
            | RunOutcome::ToolCallsSuspended { .. }
            | RunOutcome::AwaitingAnswer { .. } => match ask(slot, decided_by).await? {
                Asked::Decided(outcome) => outcome,
                Asked::Stop(reason) => return Ok(reason),
            },
        };
    }
}

/// How a run that ended ends the turn: `cancelled` after `session/cancel`, `refusal` when the
/// model's last call stopped on its content filter, else `reason`.
fn ended(slot: &Slot, reason: StopReason) -> StopReason {
    if slot.cancel_requested() {
        return StopReason::Cancelled;
    }
    let finish = slot.updates.seen().finish_reason.clone();
    match finish.as_deref() {
        Some("content_filter" | "refusal") => StopReason::Refusal,
        _ => reason,
    }
}

/// Asks the client about the first pending decision that waits, and applies its answer.
async fn ask(slot: &Slot, decided_by: &str) -> Result<Asked, Error> {
    let (request, offer, decision_id, sha256) = {
        let session = slot.session.lock().await;
        let Some(pending) = session.pending().iter().find(|p| p.is_waiting()) else {
            // Settled meanwhile (a manual switch): the turn is over.
            return Ok(Asked::Stop(ended(slot, StopReason::EndTurn)));
        };
        if matches!(pending, PendingDecision::Suspension(_)) {
            // Not asked over ACP yet (issue 37): the turn ends with the call waiting; the
            // next prompt cancels it and the model is told the user did not answer.
            return Ok(Asked::Stop(ended(slot, StopReason::EndTurn)));
        }
        let tool_call_id = slot.updates.ids().of(pending.tool_call_id());
        let (tool_call, offer) = match pending {
            PendingDecision::Plan(plan) => (
                permission::plan_tool_call(tool_call_id, plan),
                Offer::plan(&slot.graph, plan),
            ),
            PendingDecision::ToolCall(call) => (
                permission::waiting_tool_call(tool_call_id, call, kind(call.tool_name())),
                Offer::tool_call(call),
            ),
            _ => return Ok(Asked::Stop(ended(slot, StopReason::EndTurn))),
        };
        let request = RequestPermissionRequest::new(
            slot.updates.session_id.clone(),
            tool_call,
            offer.permission_options(),
        );
        let sha256 = match pending {
            PendingDecision::Plan(plan) => plan.payload().submission.sha256.clone(),
            PendingDecision::ToolCall(call) => call.args_sha256().to_owned(),
            other => other.sha256().to_owned(),
        };
        (request, offer, pending.decision_id().to_owned(), sha256)
    };
    let stop_waiting = slot.asking();
    let answer = tokio::select! {
        response = slot.updates.cx.send_request(request).block_task() => offer.answer(response),
        () = stop_waiting.cancelled() => Answer::Undecided,
    };
    slot.answered();
    let mut session = slot.session.lock().await;
    let verdict = match answer {
        Answer::Selected(verdict) if !slot.cancel_requested() => verdict,
        other => {
            let reason = if slot.cancel_requested() || other == Answer::Cancelled {
                StopReason::Cancelled
            } else {
                StopReason::EndTurn
            };
            // Not approved: with a store it stays pending (`decide`, or `session/load` and a
            // later answer, settles it); without one the run ends unapproved.
            if !slot.has_store {
                session.abort().await.map_err(session_error)?;
            }
            return Ok(Asked::Stop(reason));
        }
    };
    let decision = verdict.decision(&sha256, decided_by);
    match session.decide(&decision_id, decision).await {
        Ok(outcome) => Ok(Asked::Decided(outcome)),
        // Settled meanwhile (a manual switch cancelled it): nothing was approved.
        Err(error) if error.is_conflict() || session.pending().is_empty() => {
            tracing::debug!(%error, "the decision was settled before the answer");
            Ok(Asked::Stop(ended(slot, StopReason::EndTurn)))
        }
        Err(error) => Err(session_error(error)),
    }
}
