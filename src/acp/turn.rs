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
use crate::session::{CallStatus, PendingDecision, RunOutcome};

/// The final update of a call that waited for approval when its prompt was cancelled, without
/// a store.
const CANCELLED: &str = "Cancelled: the prompt was cancelled before this was decided; it was not approved and did not run.";

/// The same with a store, where the decision stays pending.
const CANCELLED_KEPT: &str = "Cancelled: the prompt was cancelled before this was decided; it was not approved and did not run. It stays pending in the session's store: the next prompt sets it aside, or `agent-controller decide` settles it.";

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
    let stop = run(&slot, text, &decided_by).await;
    slot.end_turn();
    stop
}

/// Sends the user's `text` (a plan or tool call still waiting, as after a load, is set aside
/// by it, as not approved: the prompt is the feedback), then asks about each decision the run
/// suspends on, until it ends.
async fn run(slot: &Slot, text: String, decided_by: &str) -> Result<StopReason, Error> {
    let mut outcome = {
        let mut session = slot.session.lock().await;
        if slot.cancel_requested() {
            return Ok(StopReason::Cancelled);
        }
        session.send_message(text).await.map_err(session_error)?
    };
    loop {
        outcome = match outcome {
            RunOutcome::Suspended { .. }
            | RunOutcome::ToolCallsSuspended { .. }
            | RunOutcome::AwaitingAnswer { .. } => match ask(slot, decided_by).await? {
                Asked::Decided(outcome) => outcome,
                Asked::Stop(reason) => return Ok(reason),
            },
            ended => return run_ended(slot, &ended).await,
        };
    }
}

/// How a run that ended ends the turn: `cancelled` after `session/cancel`, else the library's
/// stop reason for the outcome ([`crate::session::StopReason::of`]); a failure that is no limit
/// is an internal error with the model's error.
async fn run_ended(slot: &Slot, outcome: &RunOutcome) -> Result<StopReason, Error> {
    if slot.cancel_requested() {
        return Ok(StopReason::Cancelled);
    }
    let finish = slot.session.lock().await.last_finish();
    match crate::session::StopReason::of(outcome, finish) {
        Some(reason) => Ok(stop_reason(reason)),
        None => match outcome {
            RunOutcome::Failed { error, .. } => {
                Err(Error::internal_error().data(error.to_string()))
            }
            _ => Ok(StopReason::EndTurn),
        },
    }
}

/// The library's stop reason as ACP's (the same names).
pub(crate) fn stop_reason(reason: crate::session::StopReason) -> StopReason {
    use crate::session::StopReason as Library;
    match reason {
        Library::EndTurn => StopReason::EndTurn,
        Library::MaxTokens => StopReason::MaxTokens,
        Library::MaxTurnRequests => StopReason::MaxTurnRequests,
        Library::Refusal => StopReason::Refusal,
        Library::Cancelled => StopReason::Cancelled,
    }
}

/// How a turn whose run did not end here ends (nothing was decided, or it was settled
/// meanwhile): `cancelled` after `session/cancel`, else `end_turn`.
fn ended(slot: &Slot) -> StopReason {
    if slot.cancel_requested() {
        StopReason::Cancelled
    } else {
        StopReason::EndTurn
    }
}

/// Asks the client about the first pending decision that waits, and applies its answer.
async fn ask(slot: &Slot, decided_by: &str) -> Result<Asked, Error> {
    let (request, offer, decision_id, sha256) = {
        let session = slot.session.lock().await;
        let Some(pending) = session.pending().iter().find(|p| p.is_waiting()) else {
            // Settled meanwhile (a manual switch): the turn is over.
            return Ok(Asked::Stop(ended(slot)));
        };
        if matches!(pending, PendingDecision::Suspension(_)) {
            // Not asked over ACP yet (issue 37): the turn ends with the call waiting; the
            // next prompt cancels it and the model is told the user did not answer.
            return Ok(Asked::Stop(ended(slot)));
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
            _ => return Ok(Asked::Stop(ended(slot))),
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
            // Not approved: with a store it stays pending (`decide`, or the prompt after a
            // `session/load`, settles it); without one the run ends unapproved.
            let waiting: Vec<String> = session
                .pending()
                .iter()
                .filter(|p| p.is_waiting())
                .map(|p| p.tool_call_id().to_owned())
                .collect();
            if !slot.has_store {
                session.abort().await.map_err(session_error)?;
            }
            if reason == StopReason::Cancelled {
                // The turn is over: every call it asked about, or would have, ends for the
                // editor, as not approved.
                let result = if slot.has_store {
                    CANCELLED_KEPT
                } else {
                    CANCELLED
                };
                for tool_call_id in &waiting {
                    slot.updates
                        .end_call(tool_call_id, result, CallStatus::Failed);
                }
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
            Ok(Asked::Stop(ended(slot)))
        }
        Err(error) => Err(session_error(error)),
    }
}
