//! What a session keeps and saves ([`State`]), and what a running run's record says of its
//! lease ([`Lease`]).

use std::sync::Arc;

use crate::event::{DecidedRecord, RunState};
use crate::mode::ModeId;
use crate::model::Message;
use crate::store::PlanRevision;
use crate::tool::ToolCall;

use super::pending::{PendingDecision, PendingToolCall};

/// The lease of a running run, as its record keeps it: who carries the run on, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) owner: String,
    pub(crate) expires_at_ms: u64,
}

/// What a session keeps that its record saves and that changes as it runs: the mode, the
/// conversation, the run, what waits for a decision and the decisions taken.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) mode: ModeId,
    pub(crate) messages: Vec<Message>,
    /// How many runs were started (the last run is `run_<counter>`).
    pub(crate) counter: u64,
    pub(crate) run: Option<(Arc<str>, RunState)>,
    /// What the suspended run waits on: one plan, or the tool calls of one reply that wait for
    /// approval, in the model's order.
    pub(crate) pending: Vec<PendingDecision>,
    /// The tools a decision allowed, until the mode changes (`enter_mode` empties it).
    pub(crate) always_allowed: Vec<String>,
    /// Every settled decision, oldest first (the audit trail; the last one is `lastDecided`).
    pub(crate) history: Vec<DecidedRecord>,
    /// How many decision ids were given out.
    pub(crate) decisions: u64,
    /// The latest plan submitted, for the next revision's number and diff.
    pub(crate) last_plan: Option<PlanRevision>,
    /// The lease of the running run, as the record has it (the owner's, maybe another
    /// process's); `None` when the run is not running or has no lease.
    pub(crate) lease: Option<Lease>,
    /// Whether this session took or renewed `lease` (it carries the run on); a session
    /// restored with a running run does not, until it takes it over.
    pub(crate) holds_lease: bool,
}

impl State {
    /// A session's state before anything happened, in `mode`.
    pub(crate) fn new(mode: ModeId) -> Self {
        Self {
            mode,
            messages: Vec::new(),
            counter: 0,
            run: None,
            pending: Vec::new(),
            always_allowed: Vec::new(),
            history: Vec::new(),
            decisions: 0,
            last_plan: None,
            lease: None,
            holds_lease: false,
        }
    }

    /// The tool calls of the suspended reply still waiting for a decision.
    pub(crate) fn undecided_calls(&self) -> Vec<PendingToolCall> {
        self.pending
            .iter()
            .filter(|p| p.is_waiting())
            .filter_map(PendingDecision::as_tool_call)
            .cloned()
            .collect()
    }

    /// The `index`-th tool call of the assistant message at `at` in the conversation.
    pub(crate) fn tool_call(&self, at: usize, index: usize) -> Option<&ToolCall> {
        match self.messages.get(at)? {
            Message::Assistant { tool_calls, .. } => tool_calls.get(index),
            _ => None,
        }
    }

    /// Puts the tool results after each assistant message in the order of its calls
    /// ([`result_positions`]), whatever order they came in: calls that ran before a suspension
    /// answered before the calls ahead of them that waited, decisions taken in another order,
    /// rejections before approvals, a plan decided after the calls behind it, an expiry or a
    /// cancellation answering the waiting calls last. Chat templates that pair results with
    /// calls by position (Qwen's `<tool_response>` carries no id) would otherwise show the
    /// model the wrong result for a call (langchain-ai/langgraph#6626).
    ///
    /// Only the order changes. Called before each model call, where no change is being saved
    /// (while one is, the conversation only grows: a failed save truncates it back); the next
    /// save keeps the new order.
    pub(crate) fn order_results(&mut self) {
        let mut at = 0;
        while at < self.messages.len() {
            let start = at + 1;
            let end = start
                + self.messages[start..]
                    .iter()
                    .take_while(|m| matches!(m, Message::Tool { .. }))
                    .count();
            if let Message::Assistant { tool_calls, .. } = &self.messages[at]
                && let Some(positions) = result_positions(tool_calls, &self.messages[start..end])
            {
                let mut block: Vec<(usize, Message)> = positions
                    .into_iter()
                    .zip(self.messages.drain(start..end))
                    .collect();
                // Stable: results of one id keep their relative order.
                block.sort_by_key(|(position, _)| *position);
                self.messages
                    .splice(start..start, block.into_iter().map(|(_, m)| m));
            }
            at = end;
        }
    }
}

/// The order results of `calls` should have, when `results` (the tool messages right after
/// them) are not in it already: for each result, the position of the call it answers, the first
/// call of its id that no earlier result answers (a model may repeat an id), or `usize::MAX`
/// for a result that answers none (it goes last). `None` when the results are in order: their
/// ids are a subsequence of the calls' ids.
fn result_positions(calls: &[ToolCall], results: &[Message]) -> Option<Vec<usize>> {
    fn id(m: &Message) -> &str {
        match m {
            Message::Tool { tool_call_id, .. } => tool_call_id,
            _ => "",
        }
    }
    let mut next = 0;
    let in_order = results.iter().all(|r| {
        let found = calls[next..].iter().position(|c| c.id == id(r));
        found.map(|k| next += k + 1).is_some()
    });
    if in_order {
        return None;
    }
    let mut by_id: std::collections::HashMap<&str, std::collections::VecDeque<usize>> =
        std::collections::HashMap::new();
    for (k, call) in calls.iter().enumerate() {
        by_id.entry(call.id.as_str()).or_default().push_back(k);
    }
    Some(
        results
            .iter()
            .map(|r| {
                by_id
                    .get_mut(id(r))
                    .and_then(std::collections::VecDeque::pop_front)
                    .unwrap_or(usize::MAX)
            })
            .collect(),
    )
}
