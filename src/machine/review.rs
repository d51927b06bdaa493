//! What a reviewer's verdict does ([`crate::review`]), without I/O: the driver asks the mode's
//! reviewer (`src/session/reviewers.rs`) and shows its verdict on the pending decision (the
//! payload's `review`); this rule says whether the verdict is the decision.
//!
//! Under `reviewerMay = "decide"` an `approve` stands as an approval pinned to the sha256 the
//! reviewer was given (so it never approves text it was not given: a plan or a call that is not
//! the one it saw is refused by the one check, [`super::check::check`]), and a `reject` stands
//! as a rejection whose feedback is its reason. An `escalate`, a failed reviewer (counted as
//! escalate), and every verdict under `"advise"` leave the decision to a person, who sees it.

use super::change::Change;
use super::decision::Decision;
use super::error::SessionError;
use super::next::Next;
use super::pending::PendingDecision;
use crate::review::{ReviewDecision, ReviewRecord, ReviewerMay};

/// The decision `review` takes on what has `shown_sha256`, under `may`; `None` when a person
/// decides (advise, escalate, a failed reviewer, or a verdict on other text).
pub(crate) fn reviewed(
    review: &ReviewRecord,
    may: ReviewerMay,
    shown_sha256: &str,
) -> Option<Decision> {
    if may != ReviewerMay::Decide || review.error.is_some() || review.sha256 != shown_sha256 {
        return None;
    }
    let by = format!("reviewer {}", review.reviewer);
    let decision = match review.decision {
        ReviewDecision::Approve => Decision::approve(),
        ReviewDecision::Reject => Decision::reject_with(format!(
            "Rejected by reviewer `{}`: {}",
            review.reviewer,
            review.reason.as_deref().unwrap_or("no reason given")
        )),
        ReviewDecision::Escalate => return None,
    };
    Some(
        decision
            .with_sha256(&review.sha256)
            .decided_by(by)
            .via(crate::quorum::Via::Reviewer),
    )
}

impl Change<'_> {
    /// The `Review` input: applies the verdict shown on the pending decision `decision_id`
    /// ([`reviewed`]), as the decision of the reviewer (its record's `review` marked
    /// `decided`). [`Next::Nothing`] when a person decides, or nothing waits under that id.
    ///
    /// # Errors
    /// What the one check refuses ([`super::check::check`]); nothing changes.
    pub(crate) fn review(
        &mut self,
        decision_id: &str,
        lacking: &[String],
    ) -> Result<Next, SessionError> {
        let Some(index) = self
            .state
            .pending
            .iter()
            .position(|p| p.decision_id() == decision_id)
        else {
            return Ok(Next::Nothing);
        };
        let pending = &self.state.pending[index];
        let (review, sha256) = match pending {
            PendingDecision::Plan(plan) => (
                plan.payload.review.as_deref(),
                plan.payload.submission.sha256.as_str(),
            ),
            PendingDecision::ToolCall(call) if call.decided.is_none() => (
                call.payload.review.as_deref(),
                call.payload.args_sha256.as_str(),
            ),
            _ => return Ok(Next::Nothing),
        };
        let Some(review) = review else {
            return Ok(Next::Nothing);
        };
        let may = self
            .config
            .graph
            .mode(self.state.mode)
            .review()
            .map_or(ReviewerMay::Advise, |r| r.may());
        let Some(decision) = reviewed(review, may, sha256) else {
            return Ok(Next::Nothing);
        };
        // A reviewer's approval never counts toward a quorum: the people decide, seeing it (its
        // rejection still stands, as any one's does).
        if decision.action == super::decision::DecisionAction::Approved
            && super::quorum::under_quorum(pending)
        {
            return Ok(Next::Nothing);
        }
        // Nor does it loosen the managed config: a tool call that its managed `rules` or
        // `requireApproval` hold waits for a person ([`crate::config::Layers`]).
        let mode = self.config.graph.mode(self.state.mode);
        if decision.action == super::decision::DecisionAction::Approved
            && matches!(pending, PendingDecision::ToolCall(_))
            && (mode.managed_approval() || mode.managed_rules())
        {
            return Ok(Next::Nothing);
        }
        let record = ReviewRecord {
            decided: true,
            ..review.clone()
        };
        let checked = super::check::check(pending, &decision)?;
        self.decide(
            index,
            decision,
            checked,
            lacking,
            Some(Box::new(record)),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::decision::DecisionAction;
    use crate::review::{ReviewError, ReviewVerdict};

    fn review(answer: Result<ReviewVerdict, ReviewError>) -> ReviewRecord {
        ReviewRecord::of("critic", "abc", answer)
    }

    #[test]
    fn only_an_approval_or_a_rejection_under_decide_of_the_text_shown_stands() {
        let approve = review(Ok(ReviewVerdict::approve("fine")));
        let decision = reviewed(&approve, ReviewerMay::Decide, "abc").expect("stands");
        assert_eq!(decision.action, DecisionAction::Approved);
        assert_eq!(decision.sha256.as_deref(), Some("abc"), "pinned");
        assert_eq!(decision.decided_by.as_deref(), Some("reviewer critic"));
        assert_eq!(decision.via, Some(crate::quorum::Via::Reviewer));
        // Advice never decides; a verdict on other text never does.
        assert_eq!(reviewed(&approve, ReviewerMay::Advise, "abc"), None);
        assert_eq!(reviewed(&approve, ReviewerMay::Decide, "other"), None);
        let reject = review(Ok(ReviewVerdict::reject("no tests")));
        let decision = reviewed(&reject, ReviewerMay::Decide, "abc").expect("stands");
        assert_eq!(decision.action, DecisionAction::Rejected);
        assert_eq!(
            decision.feedback.as_deref(),
            Some("Rejected by reviewer `critic`: no tests")
        );
        let escalate = review(Ok(ReviewVerdict::escalate("unsure")));
        assert_eq!(reviewed(&escalate, ReviewerMay::Decide, "abc"), None);
        let failed = review(Err(ReviewError::new("timed out")));
        assert_eq!(reviewed(&failed, ReviewerMay::Decide, "abc"), None);
    }
}
