//! What a session keeps and saves ([`State`]), and what a running run's record says of its
//! lease ([`Lease`]).

use std::sync::Arc;

use crate::allowance::{Allowance, AllowanceScope};
use crate::event::{DecidedRecord, RunState};
use crate::exchange::Message;
use crate::exchange::ToolCall;
use crate::mode::ModeId;
use crate::plan::PlanRevision;

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
    /// The conversation, shared copy-on-write ([`State::push_message`]): the copy of the state
    /// a refusable change is computed on costs no copy of the conversation until the change
    /// adds to it (a decision on a question adds nothing; the answer's result comes after).
    pub(crate) messages: Arc<Vec<Message>>,
    /// How many runs were started (the last run is `run_<counter>`).
    pub(crate) counter: u64,
    pub(crate) run: Option<(Arc<str>, RunState)>,
    /// What the suspended run waits on: one plan, or the tool calls of one reply that wait for
    /// approval, in the model's order.
    pub(crate) pending: Vec<PendingDecision>,
    /// The tools an allowance in force lets run whole in the current mode (no pattern), in the
    /// order they were allowed: derived from `allowances` and `workspace_allowances` by
    /// [`State::refresh_allowed`] whenever either or the mode changes.
    pub(crate) always_allowed: Vec<String>,
    /// The allowances the session's decisions gave, of scope `mode` (until the mode changes:
    /// `enter_mode` drops them) and `session` (kept, applying in their own mode only), oldest
    /// first. Saved in the session record.
    pub(crate) allowances: Vec<Allowance>,
    /// The workspace allowances of this workspace and config: loaded from the store when the
    /// session is opened or restored, and those its decisions gave (which the driver saves in
    /// the store with the change that gave them). Not part of the session record.
    pub(crate) workspace_allowances: Vec<Allowance>,
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
    /// The model an approval chose for the current mode (`Decision::model`), until the mode
    /// changes (`enter_mode` clears it).
    pub(crate) model_id: Option<String>,
    /// The session's task list ([`super::tasks`]), in order; empty until a task tool or an
    /// approved plan writes it.
    pub(crate) tasks: Vec<crate::exchange::tasks::Task>,
    /// The children of the suspended run whose calls wait in [`State::pending`] (each named by
    /// its decisions' `subagent`), with their own state, so they carry on once decided.
    pub(crate) children: Vec<WaitingChild>,
    /// The ledger of the plan approved for the current mode ([`super::ledger`]): from the
    /// approval until the mode changes.
    pub(crate) plan_ledger: Option<crate::plan_report::PlanLedger>,
    /// The report of the last run of an approved plan ([`crate::plan_report::PlanReport`]).
    pub(crate) plan_report: Option<crate::plan_report::PlanReport>,
}

/// A subagent whose calls wait for the user: which `subagent` call of the parent started it,
/// and the child's own state as it suspended (its pending decisions under its own ids).
#[derive(Debug, Clone)]
pub(crate) struct WaitingChild {
    /// The parent's `subagent` call.
    pub(crate) tool_call_id: String,
    /// The subagent's type.
    pub(crate) agent_type: Arc<str>,
    /// The child run's id.
    pub(crate) child_id: Arc<str>,
    /// The child's state.
    pub(crate) state: Box<State>,
}

impl State {
    /// A session's state before anything happened, in `mode`.
    pub(crate) fn new(mode: ModeId) -> Self {
        Self {
            mode,
            messages: Arc::default(),
            counter: 0,
            run: None,
            pending: Vec::new(),
            always_allowed: Vec::new(),
            allowances: Vec::new(),
            workspace_allowances: Vec::new(),
            history: Vec::new(),
            decisions: 0,
            last_plan: None,
            lease: None,
            holds_lease: false,
            model_id: None,
            tasks: Vec::new(),
            children: Vec::new(),
            plan_ledger: None,
            plan_report: None,
        }
    }

    /// Every allowance the session keeps, in order: its own (mode and session scopes), then the
    /// workspace ones.
    pub(crate) fn all_allowances(&self) -> impl Iterator<Item = &Allowance> {
        self.allowances.iter().chain(&self.workspace_allowances)
    }

    /// The allowances that apply in mode `mode_id`: every kept one given in that mode (a
    /// `mode` allowance is only kept while its mode lasts).
    pub(crate) fn allowances_in<'a>(
        &'a self,
        mode_id: &'a str,
    ) -> impl Iterator<Item = &'a Allowance> + 'a {
        self.all_allowances().filter(move |a| a.mode_id == mode_id)
    }

    /// Recomputes `always_allowed` for the current mode `mode_id`: the tools of the allowances
    /// in force there without a pattern, each once.
    pub(crate) fn refresh_allowed(&mut self, mode_id: &str) {
        let mut tools: Vec<String> = Vec::new();
        for allowance in self.allowances_in(mode_id) {
            if allowance.pattern.is_none()
                && allowance.plan.is_none()
                && !tools.contains(&allowance.tool_name)
            {
                tools.push(allowance.tool_name.clone());
            }
        }
        self.always_allowed = tools;
    }

    /// Keeps `allowance` (given in mode `mode_id`, the current one): a workspace one beside the
    /// loaded ones, the others in the session's; one that allows what a kept one of the same
    /// scope allows already is not kept twice. Returns whether it was new.
    pub(crate) fn keep_allowance(&mut self, allowance: Allowance, mode_id: &str) -> bool {
        let kept = match allowance.scope {
            AllowanceScope::Workspace => &mut self.workspace_allowances,
            AllowanceScope::Mode | AllowanceScope::Session | AllowanceScope::Plan => {
                &mut self.allowances
            }
        };
        let new = !kept.iter().any(|a| a.allows_as(&allowance));
        if new {
            kept.push(allowance);
        }
        self.refresh_allowed(mode_id);
        new
    }

    /// Drops the allowance with id `id` (any scope); returns it, if the session kept it.
    pub(crate) fn drop_allowance(&mut self, id: &str, mode_id: &str) -> Option<Allowance> {
        let dropped = [&mut self.allowances, &mut self.workspace_allowances]
            .into_iter()
            .find_map(|kept| {
                let at = kept.iter().position(|a| a.id == id)?;
                Some(kept.remove(at))
            });
        self.refresh_allowed(mode_id);
        dropped
    }

    /// Takes back the approvals that allowances no longer kept gave to calls of the suspended
    /// reply (`allowedBy` one revoked since it approved them, unseen): each such call waits
    /// again, to be asked about. An approval the user gave by hand stays.
    pub(crate) fn withdraw_approvals_of_revoked(&mut self) {
        let kept: Vec<String> = self.all_allowances().map(|a| a.id.clone()).collect();
        for pending in &mut self.pending {
            let PendingDecision::ToolCall(call) = pending else {
                continue;
            };
            let allowed_by = call.decided.as_ref().and_then(|d| d.allowed_by.as_ref());
            if allowed_by.is_some_and(|id| !kept.contains(id)) {
                call.decided = None;
            }
        }
    }

    /// The tool calls of the suspended reply still waiting for a decision.
    /// Whether a call its tool suspended waits for an answer.
    pub(crate) fn awaits_answer(&self) -> bool {
        self.pending
            .iter()
            .any(|p| p.is_waiting() && matches!(p, PendingDecision::Suspension(_)))
    }

    /// What still waits, whatever the kind.
    pub(crate) fn undecided(&self) -> Vec<PendingDecision> {
        self.pending
            .iter()
            .filter(|p| p.is_waiting())
            .cloned()
            .collect()
    }

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
            let positions = match &self.messages[at] {
                Message::Assistant { tool_calls, .. } => {
                    result_positions(tool_calls, &self.messages[start..end])
                }
                _ => None,
            };
            if let Some(positions) = positions {
                let messages = Arc::make_mut(&mut self.messages);
                let mut block: Vec<(usize, Message)> = positions
                    .into_iter()
                    .zip(messages.drain(start..end))
                    .collect();
                // Stable: results of one id keep their relative order.
                block.sort_by_key(|(position, _)| *position);
                messages.splice(start..start, block.into_iter().map(|(_, m)| m));
            }
            at = end;
        }
    }

    /// Adds `message` to the conversation: the state's own copy of it, made now if another
    /// state shares it (copy-on-write).
    pub(crate) fn push_message(&mut self, message: Message) {
        Arc::make_mut(&mut self.messages).push(message);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn assistant(ids: &[&str]) -> Message {
        Message::Assistant {
            content: String::new(),
            tool_calls: ids
                .iter()
                .map(|id| ToolCall {
                    id: (*id).to_owned(),
                    name: "read_file".to_owned(),
                    args: json!({}),
                })
                .collect(),
        }
    }

    fn result(id: &str, content: &str) -> Message {
        Message::Tool {
            tool_call_id: id.to_owned(),
            tool_name: "read_file".to_owned(),
            content: content.to_owned(),
            is_error: false,
        }
    }

    fn contents(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                Message::Tool { content, .. } => content.clone(),
                Message::User { content } => format!("user {content}"),
                _ => "assistant".to_owned(),
            })
            .collect()
    }

    /// A state whose conversation is a user message, then `messages`.
    fn after_go(messages: Vec<Message>) -> State {
        let mut state = State::new(ModeId::from_index(0));
        state.push_message(Message::User {
            content: "go".to_owned(),
        });
        Arc::make_mut(&mut state.messages).extend(messages);
        state
    }

    /// The copy a refusable change is computed on shares the conversation; what the copy adds
    /// never reaches the state it was taken from (a refused change drops the copy).
    #[test]
    fn a_copy_shares_the_conversation_until_it_adds_to_it() {
        let state = after_go(Vec::new());
        let mut copy = state.clone();
        assert!(
            Arc::ptr_eq(&state.messages, &copy.messages),
            "no copy of the conversation"
        );
        copy.push_message(Message::User {
            content: "more".to_owned(),
        });
        assert_eq!(
            contents(&state.messages),
            ["user go"],
            "the state is as it was"
        );
        assert_eq!(contents(&copy.messages), ["user go", "user more"]);
    }

    #[test]
    fn results_go_in_the_order_of_their_calls_reply_by_reply() {
        let mut state = after_go(vec![
            assistant(&["a", "b", "c"]),
            result("c", "C"),
            result("a", "A"),
            result("zz", "stray"),
            result("b", "B"),
            assistant(&["d", "e"]),
            result("e", "E"),
            result("d", "D"),
        ]);
        state.order_results();
        assert_eq!(
            contents(&state.messages),
            [
                "user go",
                "assistant",
                "A",
                "B",
                "C",
                "stray",
                "assistant",
                "D",
                "E"
            ]
        );
    }

    #[test]
    fn results_of_a_repeated_id_answer_its_calls_in_turn() {
        let calls = match assistant(&["x", "y", "x"]) {
            Message::Assistant { tool_calls, .. } => tool_calls,
            _ => unreachable!(),
        };
        let in_order = [result("x", "1"), result("y", "2"), result("x", "3")];
        assert_eq!(result_positions(&calls, &in_order), None);
        let partial = [result("y", "2")];
        assert_eq!(result_positions(&calls, &partial), None);
        let swapped = [result("y", "2"), result("x", "1"), result("x", "3")];
        assert_eq!(result_positions(&calls, &swapped), Some(vec![1, 0, 2]));
        let stray = [result("q", "?"), result("x", "1")];
        assert_eq!(result_positions(&calls, &stray), Some(vec![usize::MAX, 0]));
    }

    #[test]
    fn a_tool_call_is_read_from_an_assistant_message_only() {
        let state = after_go(vec![assistant(&["a", "b"])]);
        assert_eq!(state.tool_call(1, 1).map(|c| c.id.as_str()), Some("b"));
        assert_eq!(state.tool_call(1, 2), None);
        assert_eq!(state.tool_call(0, 0), None);
        assert_eq!(state.tool_call(5, 0), None);
        assert!(state.undecided_calls().is_empty());
    }

    #[test]
    fn an_allowance_is_kept_once_unless_its_scope_mode_tool_or_pattern_differs() {
        use crate::allowance::{Allowance, AllowancePattern, AllowanceScope};
        let given = |scope, mode: &str, tool: &str| Allowance::new(scope, "a1", mode, tool);
        let first = given(AllowanceScope::Session, "build", "write_file");
        let mut state = after_go(Vec::new());
        assert!(state.keep_allowance(first.clone(), "build"));
        assert!(!state.keep_allowance(first.clone(), "build"));
        let others = [
            given(AllowanceScope::Mode, "build", "write_file"),
            given(AllowanceScope::Session, "review", "write_file"),
            given(AllowanceScope::Session, "build", "run_command"),
            first.clone().narrowed(AllowancePattern::path("src/**")),
        ];
        for (n, other) in others.into_iter().enumerate() {
            assert!(
                state.keep_allowance(other, "build"),
                "allowance {n} differs"
            );
            assert_eq!(state.allowances.len(), n + 2);
        }
    }
}
