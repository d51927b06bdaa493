//! The driver's side of reviewers ([`crate::review`]): it asks the mode's reviewer about a plan
//! or a waiting tool call (the I/O: a reviewer may be a command or a model), logs a failure,
//! and hands the verdict to the core, shown on the pending decision; the core's rule
//! ([`crate::machine::review`]) alone says whether it is the decision.

use std::sync::Arc;

use crate::hook::{HookOn, HookRequest, HookSubject};
use crate::machine::input::Input;
use crate::machine::next::Next;
use crate::review::{ReviewError, ReviewRecord};

use super::bounded::ask_bounded;
use super::{Session, SessionError};

impl Session {
    /// What the current mode's reviewer (`reviewBy`) says about `subject` in run `run_id`;
    /// `None` when the mode has no reviewer, or (a tool call) does not send it its tool calls
    /// (`reviewToolCalls`). A reviewer that is not registered, fails, panics, is still
    /// reviewing past its entry's `timeout` or when the run is cancelled counts as escalate,
    /// and the failure is logged.
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
            Some(reviewer) => ask_bounded(
                &self.run_token,
                timeout_of(&self.shared.graph, &id),
                async move { reviewer.review(&request).await },
            )
            .await
            .unwrap_or_else(|why| Err(ReviewError::new(why.explain("reviewer")))),
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

/// How long a review by reviewer `id` may take: the `timeout` of its `[[reviewers]]` entry,
/// whoever answers for the id (a host's reviewer too), else the default.
fn timeout_of(graph: &crate::mode::ModeGraph, id: &str) -> std::time::Duration {
    graph
        .reviewers()
        .iter()
        .find(|entry| entry.id() == id)
        .map_or(crate::hook::DEFAULT_HOOK_TIMEOUT, |entry| entry.timeout())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_is_bounded_by_its_entrys_timeout_else_the_default() {
        let graph = crate::config::parse(
            "[[modes]]\nid = \"plan\"\nreviewBy = \"slow\"\n\n\
             [[reviewers]]\nid = \"slow\"\nmodel = \"openai/gpt-4o\"\ntimeout = \"2m\"\n\n\
             [[reviewers]]\nid = \"plain\"\nmodel = \"openai/gpt-4o\"\n",
            "modes.toml",
        )
        .expect("valid");
        assert_eq!(timeout_of(&graph, "slow").as_secs(), 120);
        assert_eq!(
            timeout_of(&graph, "plain"),
            crate::review::DEFAULT_MODEL_REVIEW_TIMEOUT
        );
        assert_eq!(
            timeout_of(&graph, "unknown"),
            crate::hook::DEFAULT_HOOK_TIMEOUT
        );
    }
}
