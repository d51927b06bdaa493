//! `session/prompt`: one turn. The message runs; each decision the run suspends on becomes a
//! `session/request_permission`, and the client's answer decides it (or, when it decides
//! nothing, leaves it pending with a store and unapproved without one); the turn ends with the
//! stop reason of how the last run ended.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    Content, CreateElicitationRequest, RequestPermissionRequest, StopReason, ToolCallContent,
    ToolCallUpdate,
};

use crate::acp::permission::{self, Answer, Offer};
use crate::acp::question::{self, Form, Way};
use crate::acp::slot::Slot;
use crate::acp::update::kind;
use crate::acp::{Error, session_error};
use crate::event::ToolSuspendPayload;
use crate::session::{CallStatus, Decision, PendingDecision, RunOutcome};

/// The final update of a call that waited for approval when its prompt was cancelled, without
/// a store.
const CANCELLED: &str = "Cancelled: the prompt was cancelled before this was decided; it was not approved and did not run.";

/// The same with a store, where the decision stays pending.
const CANCELLED_KEPT: &str = "Cancelled: the prompt was cancelled before this was decided; it was not approved and did not run. It stays pending in the session's store: the next prompt sets it aside, or `agent-controller decide` settles it.";

/// The final update of a question (a call its tool suspended) that waited for an answer when
/// its prompt was cancelled, without a store.
const UNANSWERED: &str =
    "Cancelled: the prompt was cancelled before this was answered; there is no answer.";

/// The same with a store, where the question stays pending.
const UNANSWERED_KEPT: &str = "Cancelled: the prompt was cancelled before this was answered; there is no answer yet. It stays pending in the session's store: the next prompt answers it when it fits the answer (else sets it aside), or `agent-controller decide --answer` answers it.";

/// What asking about one pending decision led to.
// Returned once per answer and matched at once, as `RunOutcome` is.
#[allow(clippy::large_enum_variant)]
enum Asked {
    /// It was decided: the run carried on to this outcome.
    Decided(RunOutcome),
    /// Nothing was decided: the turn ends with this stop reason.
    Stop(StopReason),
}

/// Runs one prompt turn of `slot` with the user's `text` (`elicits`: the client advertised
/// elicitation forms); the turn ends (another prompt may start) however it returns.
pub(crate) async fn prompt(
    slot: Arc<Slot>,
    text: String,
    decided_by: Arc<str>,
    elicits: bool,
) -> Result<StopReason, Error> {
    let stop = run(&slot, text, &decided_by, elicits).await;
    slot.end_turn();
    stop
}

/// Sends the user's `text` (a plan or tool call still waiting, as after a load, is set aside
/// by it, as not approved: the prompt is the feedback), or, when a question waits and the text
/// fits its answer, answers it with the text ([`prompt_answer`]); then asks about each
/// decision the run suspends on, until it ends. `elicits`: the client advertised elicitation
/// forms.
async fn run(
    slot: &Slot,
    text: String,
    decided_by: &str,
    elicits: bool,
) -> Result<StopReason, Error> {
    let mut outcome = {
        let mut session = slot.session.lock().await;
        if slot.cancel_requested() {
            return Ok(StopReason::Cancelled);
        }
        match prompt_answer(&session, &text) {
            Some((decision_id, decision)) => {
                let decision = decision.decided_by(decided_by).via(crate::quorum::Via::Acp);
                session
                    .decide(&decision_id, decision)
                    .await
                    .map_err(session_error)?
            }
            None => session.send_message(text).await.map_err(session_error)?,
        }
    };
    loop {
        outcome = match outcome {
            RunOutcome::Suspended { .. }
            | RunOutcome::ToolCallsSuspended { .. }
            | RunOutcome::AwaitingAnswer { .. } => match ask(slot, decided_by, elicits).await? {
                Asked::Decided(outcome) => outcome,
                Asked::Stop(reason) => return Ok(reason),
            },
            ended => return run_ended(slot, &ended).await,
        };
    }
}

/// The answer a prompt gives: the first call waiting for an answer (a question), when the
/// prompt's text fits its answer ([`crate::event::ToolSuspendPayload::answer_from_text`]: any
/// text for a free-text question, an option's exact label for a select question, JSON that
/// fits for another tool's); its decision id and the answer pinned to its payload. `None`
/// when nothing waits for an answer or the text does not fit: the prompt is a new message.
fn prompt_answer(session: &crate::Session, text: &str) -> Option<(String, Decision)> {
    let waiting = question::answered_by_prompt(session)?;
    let payload = waiting.payload();
    let answer = payload.answer_from_text(text)?;
    let decision = Decision::answer(answer).with_sha256(&payload.payload_sha256);
    Some((waiting.decision_id().to_owned(), decision))
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

/// What is sent to ask about one decision.
enum Request {
    /// `session/request_permission`, with the options offered.
    Permission(RequestPermissionRequest, Offer),
    /// `elicitation/create`, with the form and what it asks about.
    Elicit(CreateElicitationRequest, Form, Box<ToolSuspendPayload>),
}

impl Request {
    /// The same request again, saying first why the last answer was not taken.
    fn again(self, why: &str) -> Self {
        let note = format!("Your answer was not taken: {why}. Answer again.");
        match self {
            Request::Permission(mut request, offer) => {
                let shown = request.tool_call.fields.content.take().unwrap_or_default();
                let mut content = vec![ToolCallContent::Content(Content::new(note))];
                content.extend(shown);
                request.tool_call.fields.content = Some(content);
                Request::Permission(request, offer)
            }
            Request::Elicit(mut request, form, payload) => {
                request.message = format!("{note}\n\n{}", request.message);
                Request::Elicit(request, form, payload)
            }
        }
    }
}

/// The final update of a call whose answer was refused twice, without a store: a question is
/// not answered, a plan or a tool call not decided.
fn unfit(why: &str, question: bool) -> String {
    let (what, none) = if question {
        ("Not answered", "there is no answer")
    } else {
        ("Not decided", "it was not approved and did not run")
    };
    format!("{what}: the answer given was not taken ({why}); {none}.")
}

/// The same with a store, where it stays pending.
fn unfit_kept(why: &str, question: bool) -> String {
    let what = if question {
        "Not answered yet"
    } else {
        "Not decided yet"
    };
    format!(
        "{what}: the answer given was not taken ({why}). It stays pending in the session's store: the next prompt answers it when it fits (else sets it aside), or `agent-controller decide` settles it."
    )
}

/// Asks the client about the first pending decision that waits (the calls whose answer is the
/// next prompt last), and applies its answer. A call whose answer is the next prompt ends the
/// turn, the client told so.
async fn ask(slot: &Slot, decided_by: &str, elicits: bool) -> Result<Asked, Error> {
    let (request, decision_id, sha256, (asked_id, question)) = {
        let session = slot.session.lock().await;
        let way = |p: &PendingDecision| {
            p.as_suspension()
                .map(|s| question::way(s.payload(), elicits))
        };
        let mut waiting = session.pending().iter().filter(|p| p.is_waiting());
        let asked = waiting
            .clone()
            .map(|p| (p, way(p)))
            .find(|(_, way)| !matches!(way, Some(Way::NextPrompt)));
        let Some((pending, way)) = asked.or_else(|| waiting.next().map(|p| (p, way(p)))) else {
            // Settled meanwhile (a manual switch): the turn is over.
            return Ok(Asked::Stop(ended(slot)));
        };
        // A child's call is the one the child announced (keyed by its id and the call's).
        let child = pending.subagent().map(|s| s.child_id.as_str());
        let tool_call_id = slot.updates.ids().of_in(child, pending.tool_call_id());
        let request = match (pending, way) {
            (PendingDecision::Plan(plan), _) => {
                let offer = Offer::plan(&slot.graph, plan);
                let tool_call = permission::plan_tool_call(tool_call_id, plan);
                Request::Permission(permission_request(slot, tool_call, &offer), offer)
            }
            (PendingDecision::ToolCall(call), _) => {
                let offer = Offer::tool_call(call);
                let kind = kind(call.tool_name());
                let tool_call = permission::waiting_tool_call(tool_call_id, call, kind);
                Request::Permission(permission_request(slot, tool_call, &offer), offer)
            }
            (PendingDecision::Suspension(suspended), Some(Way::Choices(offer))) => {
                let tool_call = question::choice_tool_call(tool_call_id, suspended.payload());
                Request::Permission(permission_request(slot, tool_call, &offer), offer)
            }
            (PendingDecision::Suspension(suspended), Some(Way::Form(form))) => {
                let payload = suspended.payload();
                let request = form.request(slot.updates.session_id.clone(), tool_call_id, payload);
                Request::Elicit(request, form, Box::new(payload.clone()))
            }
            (PendingDecision::Suspension(suspended), _) => {
                // The next prompt is the answer: the client is told, the call stays pending
                // (with a store or without one), and the turn ends.
                let text = question::next_prompt_text(suspended.payload());
                slot.updates.waits_for_prompt(&tool_call_id, &text);
                return Ok(Asked::Stop(ended(slot)));
            }
        };
        let sha256 = match pending {
            PendingDecision::Plan(plan) => plan.payload().submission.sha256.clone(),
            PendingDecision::ToolCall(call) => call.args_sha256().to_owned(),
            other => other.sha256().to_owned(),
        };
        let asked = (
            pending.tool_call_id().to_owned(),
            matches!(pending, PendingDecision::Suspension(_)),
        );
        (request, pending.decision_id().to_owned(), sha256, asked)
    };
    let stop_waiting = slot.asking();
    let mut request = request;
    let mut asked_again = false;
    let answer = loop {
        let answer = match &request {
            Request::Permission(sent, offer) => tokio::select! {
                response = slot.updates.cx.send_request(sent.clone()).block_task() => offer.answer(response),
                () = stop_waiting.cancelled() => Answer::Undecided,
            },
            Request::Elicit(sent, form, payload) => tokio::select! {
                response = slot.updates.cx.send_request(sent.clone()).block_task() => form.answer(payload, response),
                () = stop_waiting.cancelled() => Answer::Undecided,
            },
        };
        // An answer that cannot be taken is asked again once, saying why (trial 5 L9).
        match answer {
            Answer::Unfit(why) if !asked_again && !slot.cancel_requested() => {
                asked_again = true;
                request = request.again(&why);
            }
            other => break other,
        }
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
            let questions: Vec<bool> = waiting
                .iter()
                .map(|id| slot.updates.is_question(id))
                .collect();
            if !slot.has_store {
                session.abort().await.map_err(session_error)?;
            }
            if let Answer::Unfit(why) = &other {
                // Refused again: the editor is told why, last, and what became of the call.
                let (text, status) = if slot.has_store {
                    (unfit_kept(why, question), CallStatus::Pending)
                } else {
                    (unfit(why, question), CallStatus::Failed)
                };
                slot.updates.end_call(&asked_id, &text, status);
            }
            if reason == StopReason::Cancelled {
                // The turn is over: every call it asked about, or would have, ends for the
                // editor, as not approved.
                for (tool_call_id, question) in waiting.iter().zip(questions) {
                    let result = match (question, slot.has_store) {
                        (false, true) => CANCELLED_KEPT,
                        (false, false) => CANCELLED,
                        (true, true) => UNANSWERED_KEPT,
                        (true, false) => UNANSWERED,
                    };
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

/// The `session/request_permission` of `slot`'s session about `tool_call`, with `offer`'s
/// options.
fn permission_request(
    slot: &Slot,
    tool_call: ToolCallUpdate,
    offer: &Offer,
) -> RequestPermissionRequest {
    RequestPermissionRequest::new(
        slot.updates.session_id.clone(),
        tool_call,
        offer.permission_options(),
    )
}
