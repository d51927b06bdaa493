//! A change of a session: the rules compute the next state on a copy of the session's
//! ([`State`]) and the events it emits, reading only the controller's config ([`Config`]) and
//! `now`, which the driver passes in. The driver saves the next state at the expected version
//! and only then swaps it in and delivers the events (`src/session/save.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::allowance::WorkspaceScope;
use crate::event::{DecidedRecord, Event, ModeChangeReason, RunState};
use crate::exchange::Message;
use crate::exchange::ToolOutput;
use crate::mode::{ModeGraph, ModeId, ModeRuntime};

use super::call::CallRef;
use super::rejection::with_approval_feedback;
use super::state::{Lease, State};

/// What of the controller's config the rules read: the mode graph and what each mode needs at
/// run time, the plan revision limit, and the lease terms (none without a store: a run is
/// shared with nobody).
#[derive(Clone, Copy)]
pub(crate) struct Config<'a> {
    pub(crate) graph: &'a ModeGraph,
    pub(crate) runtimes: &'a [ModeRuntime],
    pub(crate) max_revisions: usize,
    pub(crate) lease: Option<LeaseTerms<'a>>,
    /// The id of the controller's own model, when the host names it
    /// ([`crate::controller::AgentControllerBuilder::model_id`]).
    pub(crate) own_model: Option<&'a str>,
    /// Whether the session is a subagent's child: its plan ledger is its parent's copy
    /// ([`State::child_plan_ledger`]), whose writes go to the parent's report, so it reports
    /// nothing of its own.
    pub(crate) child: bool,
}

/// Who takes a run's lease, and for how long.
#[derive(Clone, Copy)]
pub(crate) struct LeaseTerms<'a> {
    pub(crate) owner: &'a str,
    pub(crate) duration: Duration,
}

impl Config<'_> {
    /// What `mode` needs at run time.
    pub(crate) fn runtime(&self, mode: ModeId) -> &ModeRuntime {
        &self.runtimes[mode.index().min(self.runtimes.len() - 1)]
    }
}

/// A change being computed: the session's next state and the events it emits, beside what of
/// the session it reads (the controller's config, the session id and workspace). The rules
/// that make a change are methods of this type; they never await, save or deliver.
pub(crate) struct Change<'a> {
    /// What of the controller's config the rules read.
    pub(crate) config: Config<'a>,
    /// Now, by the controller's clock (milliseconds since the Unix epoch): the rules never read
    /// a clock.
    pub(crate) now_ms: u64,
    pub(crate) id: &'a Arc<str>,
    /// Where a workspace allowance given in the change applies.
    pub(crate) workspace: WorkspaceScope<'a>,
    /// The next state.
    pub(crate) state: &'a mut State,
    /// The events of the change, in order, delivered once it is saved.
    pub(crate) events: &'a mut Vec<Event>,
}

impl Change<'_> {
    /// Emits `event` once the change is saved.
    pub(crate) fn emit(&mut self, event: Event) {
        self.events.push(event);
    }

    /// The id of the next state's mode.
    pub(crate) fn mode_arc(&self) -> Arc<str> {
        self.config.graph.mode(self.state.mode).id_arc().clone()
    }

    /// Makes `tasks` the session's task list, with `tasks_updated` carrying it whole.
    pub(crate) fn set_tasks(&mut self, run_id: Arc<str>, tasks: Vec<crate::exchange::tasks::Task>) {
        self.state.tasks = tasks;
        self.emit(Event::TasksUpdated {
            session_id: self.id.clone(),
            run_id,
            tasks: self.state.tasks.clone(),
        });
    }

    /// Now as RFC 3339 in UTC with whole seconds (`decidedAt`).
    pub(crate) fn now_rfc3339(&self) -> String {
        crate::event::rfc3339(self.now_ms / 1000)
    }

    /// Takes (or renews) the lease of the running run for this process: the change being made
    /// saves it. Without a store there is nobody to share the run with, and no lease.
    pub(crate) fn take_lease(&mut self) {
        let Some(terms) = self.config.lease else {
            return;
        };
        let duration = u64::try_from(terms.duration.as_millis()).unwrap_or(u64::MAX);
        self.state.lease = Some(Lease {
            owner: terms.owner.to_owned(),
            expires_at_ms: self.now_ms.saturating_add(duration),
        });
        self.state.holds_lease = true;
    }

    /// The run no longer runs here: it has no lease any more.
    pub(crate) fn drop_lease(&mut self) {
        self.state.lease = None;
        self.state.holds_lease = false;
    }
    /// Marks the run ended in `reason` (suspended, completed, aborted or failed) and emits
    /// `error` (for failures) and `agent_end`.
    pub(crate) fn close_run(&mut self, run_id: &Arc<str>, reason: RunState, error: Option<&str>) {
        self.state.run = Some((run_id.clone(), reason));
        self.drop_lease();
        tracing::info!(run_id = %run_id, %reason, error, "run ended");
        if let Some(message) = error {
            self.emit(Event::Error {
                session_id: self.id.clone(),
                message: message.to_owned(),
            });
        }
        self.report_plan(run_id, reason);
        self.emit(Event::AgentEnd {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            reason,
        });
    }
    /// The notice telling the model of a switch from the current mode to `target`, or `None`
    /// when `target` is the current mode.
    pub(crate) fn mode_notice(&self, target: ModeId, reason: ModeChangeReason) -> Option<String> {
        (target != self.state.mode).then(|| {
            self.config
                .runtime(target)
                .mode_notice(&self.mode_arc(), reason)
        })
    }

    /// Moves to `target`, emitting `mode_changed` and telling the model with a notice in the
    /// conversation; no-op for the same mode.
    pub(crate) fn set_mode(&mut self, target: ModeId, reason: ModeChangeReason) -> bool {
        let Some(notice) = self.mode_notice(target, reason) else {
            return false;
        };
        self.state.push_message(Message::System { content: notice });
        self.enter_mode(target, reason);
        true
    }

    /// Moves to `target` and emits `mode_changed`; the caller has told the model.
    /// Every change of mode (by hand or by an approved plan) ends the session's allowances of
    /// scope `mode` ([`Session::always_allowed`]); those of scope `session` and `workspace` are
    /// kept but apply in their own mode only: an allowance given in one mode never runs another
    /// mode's calls unasked.
    pub(crate) fn enter_mode(&mut self, target: ModeId, reason: ModeChangeReason) {
        let previous = self.mode_arc();
        // Those of scope `mode` end here, and so does an approved plan's (`plan`).
        self.state.allowances.retain(|a| {
            !matches!(
                a.scope,
                crate::allowance::AllowanceScope::Mode | crate::allowance::AllowanceScope::Plan
            )
        });
        // A model chosen at approval runs the mode it was chosen for, no other.
        self.state.model_id = None;
        // An approved plan's ledger is of its mode: the approval starts the next one after.
        self.state.plan_ledger = None;
        self.state.mode = target;
        let mode_id = self.mode_arc();
        self.state.refresh_allowed(&mode_id);
        self.emit(Event::ModeChanged {
            session_id: self.id.clone(),
            mode_id,
            previous_mode_id: previous,
            reason,
        });
    }
    /// Emits `tool_start` for the `index`-th call of the assistant message at `at` (marked
    /// `waits_for_approval` when it was ruled to wait); returns its id and tool name, or `None`
    /// when there is no such call.
    pub(crate) fn start_tool(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        index: usize,
        waits_for_approval: bool,
    ) -> Option<(String, String)> {
        let call = self.state.tool_call(at, index)?;
        let (id, name) = (call.id.clone(), call.name.clone());
        let event = Event::ToolStart {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            args: call.args.clone(),
            waits_for_approval,
        };
        self.emit(event);
        Some((id, name))
    }
    /// Ends tool call `call`: `tool_end` with its result (and the audit
    /// record of the decision that let it run, for a call that waited), and the result in the
    /// conversation.
    pub(crate) fn finish_tool(
        &mut self,
        call: CallRef,
        output: ToolOutput,
        decision: Option<DecidedRecord>,
    ) {
        let mut output = output;
        // The feedback given with an approval goes to the model with the tool's result.
        if let Some(record) = &decision
            && record.outcome == Some(crate::event::DecisionOutcome::Approved)
        {
            output.content = with_approval_feedback(output.content, record.feedback.as_deref());
        }
        self.emit(Event::ToolEnd {
            session_id: self.id.clone(),
            run_id: call.run_id,
            tool_call_id: call.call_id.clone(),
            tool_name: call.name.clone(),
            result: output.content.clone(),
            is_error: output.is_error,
            decision,
        });
        self.state.push_message(Message::Tool {
            tool_call_id: call.call_id,
            tool_name: call.name,
            content: output.content,
            is_error: output.is_error,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::rig::{Rig, runtime};

    #[test]
    fn a_mode_reads_its_own_runtime_and_one_past_the_list_reads_the_last() {
        let rig = Rig::new();
        let (plan, build, auto) = (rig.mode("plan"), rig.mode("build"), rig.mode("build-auto"));
        let runtimes = [runtime(&rig.graph, plan), runtime(&rig.graph, build)];
        let config = Config {
            graph: &rig.graph,
            runtimes: &runtimes,
            max_revisions: 1,
            lease: None,
            own_model: None,
            child: false,
        };
        assert_eq!(&*config.runtime(plan).id, "plan");
        assert_eq!(&*config.runtime(build).id, "build");
        // A config whose runtimes lack a mode (never built so) reads the last, not a panic.
        assert_eq!(&*config.runtime(auto).id, "build");
    }
}
