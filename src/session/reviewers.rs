//! The driver's side of reviewers ([`crate::review`]): it asks the mode's reviewer about a plan
//! or a waiting tool call (the I/O: a reviewer may be a command or a model), logs a failure,
//! and hands the verdict to the core, shown on the pending decision; the core's rule
//! ([`crate::machine::review`]) alone says whether it is the decision.

use std::sync::Arc;

use crate::hook::{HookOn, HookRequest, HookSubject};
use crate::machine::input::Input;
use crate::machine::next::Next;
use crate::review::{ReviewError, ReviewRecord, ReviewVerdict, Reviewer};

use super::{Session, SessionError};

impl Session {
    /// What the current mode's reviewer (`reviewBy`) says about `subject` in run `run_id`;
    /// `None` when the mode has no reviewer, or (a tool call) does not send it its tool calls
    /// (`reviewToolCalls`). A reviewer that is not registered, fails, panics, or is still
    /// reviewing when the run is cancelled counts as escalate, and the failure is logged.
    pub(crate) async fn consult_reviewer(
        &mut self,
        run_id: &Arc<str>,
        subject: HookSubject,
    ) -> Option<Box<ReviewRecord>> {
        let mode = self.shared.graph.mode(self.state.mode);
        let review = mode.review()?;
        if subject.on() == HookOn::ToolCall && !review.tool_calls() {
            return None;
        }
        let id = review.reviewer().to_owned();
        let sha256 = match &subject {
            HookSubject::Plan { sha256, .. } => sha256.clone(),
            HookSubject::ToolCall { args_sha256, .. } => args_sha256.clone(),
        };
        let request = HookRequest::new(
            &*self.id,
            &**run_id,
            mode.id(),
            &self.shared.workspace,
            subject,
        );
        let answer = match self.shared.reviewers.get(&id).cloned() {
            None => Err(ReviewError::new(format!(
                "no reviewer `{id}` is registered with the controller"
            ))),
            Some(reviewer) => self
                .run_token
                .run_until_cancelled(review_caught(reviewer, request))
                .await
                .unwrap_or_else(|| {
                    Err(ReviewError::new(
                        "the run was cancelled before the reviewer answered",
                    ))
                }),
        };
        let record = ReviewRecord::of(&id, &sha256, answer);
        match &record.error {
            Some(error) => {
                tracing::warn!(reviewer = %id, %error, "reviewer failed: counted as escalate");
            }
            None => tracing::info!(reviewer = %id, decision = %record.decision, "reviewed"),
        }
        Some(Box::new(record))
    }

    /// What the mode's reviewer says about the call at `index` of the reply at `at`, which
    /// waits for approval ([`Session::consult_reviewer`]; `None` without `reviewToolCalls`).
    pub(crate) async fn review_call(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        index: usize,
    ) -> Option<Box<ReviewRecord>> {
        let review = self.shared.graph.mode(self.state.mode).review()?;
        if !review.tool_calls() {
            return None;
        }
        let call = self.state.tool_call(at, index)?;
        let subject = HookSubject::ToolCall {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: call.args.clone(),
            args_sha256: crate::jcs::sha256(&call.args),
        };
        self.consult_reviewer(run_id, subject).await
    }

    /// Applies the verdicts of the reviewers shown on the pending decisions `decision_ids`
    /// ([`Input::Review`]), in order: `next` (what the suspension led to) unless one was taken
    /// as the decision, then what the last one taken leads to.
    pub(crate) async fn apply_reviews(
        &mut self,
        decision_ids: Vec<String>,
        mut next: Next,
    ) -> Result<Next, SessionError> {
        for decision_id in decision_ids {
            let review = Input::Review {
                decision_id,
                lacking: self.lacking_tools(),
            };
            match self.handle(review).await? {
                Next::Nothing => {}
                decided => next = decided,
            }
        }
        Ok(next)
    }
}

/// `reviewer`'s answer on `request`, in a task of its own, so a panic in it is caught (a
/// [`tokio::task::JoinError`]) and becomes an error.
async fn review_caught(
    reviewer: Arc<dyn Reviewer>,
    request: HookRequest,
) -> Result<ReviewVerdict, ReviewError> {
    let task = tokio::spawn(async move { reviewer.review(&request).await });
    match task.await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => Err(ReviewError::new("the reviewer panicked")),
        Err(e) => Err(ReviewError::new(format!(
            "the reviewer did not finish: {e}"
        ))),
    }
}
