//! A session: the current mode, the conversation, the pending plan decision, and the operations
//! that move between modes.

use std::sync::Arc;

use serde_json::Value;

use crate::controller::Shared;
use crate::event::{CancelReason, Event, ModeChangeReason, Subscriber};
use crate::mode::{Mode, ModeId};
use crate::model::Message;
use crate::run::{Decision, PendingDecision, RunOutcome, RunState};

/// Errors from session operations. Each leaves the session exactly as it was: a suspended run
/// stays suspended and can still be decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// No mode has this id (ids are case-sensitive).
    #[error("unknown mode `{0}`")]
    UnknownMode(String),
    /// No run with this id exists in the session.
    #[error("unknown run `{0}`")]
    UnknownRun(String),
    /// The run exists but is not waiting for a decision.
    #[error("run `{0}` is not suspended: there is no plan to decide")]
    NotSuspended(String),
    /// The suspended run has no pending tool call with this id.
    #[error("run `{run_id}` has no suspended tool call `{tool_call_id}`")]
    UnknownToolCall {
        /// The run id given.
        run_id: String,
        /// The tool call id given.
        tool_call_id: String,
    },
    /// This tool call was already decided (or cancelled); a decision applies once.
    #[error("tool call `{0}` was already decided")]
    AlreadyDecided(String),
    /// The decision names a different plan than the one captured at submit time.
    #[error(
        "the decision is for plan sha256 {given}, but the submitted plan has sha256 {expected}"
    )]
    Sha256Mismatch {
        /// The captured plan's hash.
        expected: String,
        /// The hash in the decision.
        given: String,
    },
    /// The resume data is not `{ action: "approved" | "rejected", feedback?, sha256? }`.
    #[error("malformed resume data: {0}")]
    MalformedDecision(String),
}

/// Options for [`crate::AgentController::start_session`].
#[derive(Default)]
pub struct SessionOptions {
    pub(crate) mode: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) subscribers: Vec<Subscriber>,
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("mode", &self.mode)
            .field("id", &self.id)
            .field("subscribers", &self.subscribers.len())
            .finish()
    }
}

impl SessionOptions {
    /// Default options: the resolved default mode, a random id, no subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Start in the mode with this id instead of the default mode.
    pub fn mode(mut self, id: impl Into<String>) -> Self {
        self.mode = Some(id.into());
        self
    }

    /// Use this session id instead of a random UUID.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Receive every event from the start (including `session_started`).
    pub fn on_event(mut self, subscriber: impl FnMut(&Event) + Send + 'static) -> Self {
        self.subscribers.push(Box::new(subscriber));
        self
    }
}

/// One conversation with a current mode. Created by [`crate::AgentController::start_session`].
///
/// Every operation takes `&mut self`: one caller drives a session at a time, so two decisions can
/// never race inside one process.
pub struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: Arc<str>,
    pub(crate) mode: ModeId,
    pub(crate) messages: Vec<Message>,
    pub(crate) counter: u64,
    pub(crate) run: Option<(Arc<str>, RunState)>,
    pub(crate) pending: Option<PendingDecision>,
    pub(crate) last_decided: Option<(Arc<str>, String)>,
    pub(crate) subscribers: Vec<Subscriber>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("mode", &self.mode().id())
            .field("run", &self.run)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: Arc<str>,
        mode: ModeId,
        subscribers: Vec<Subscriber>,
    ) -> Self {
        let mut session = Self {
            shared,
            id,
            mode,
            messages: Vec::new(),
            counter: 0,
            run: None,
            pending: None,
            last_decided: None,
            subscribers,
        };
        session.emit(Event::SessionStarted {
            session_id: session.id.clone(),
            mode_id: session.mode_arc(),
        });
        session
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The current mode: the one whose instructions and tools the next model call uses.
    pub fn mode(&self) -> &Mode {
        self.shared.graph.mode(self.mode)
    }

    /// The current mode's handle.
    pub fn mode_id(&self) -> ModeId {
        self.mode
    }

    pub(crate) fn mode_arc(&self) -> Arc<str> {
        self.mode().id_arc().clone()
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The plan waiting for a decision, if any.
    pub fn pending(&self) -> Option<&PendingDecision> {
        self.pending.as_ref()
    }

    /// The latest run's id and state, if a run was started.
    pub fn run_state(&self) -> Option<(&str, RunState)> {
        self.run.as_ref().map(|(id, state)| (&**id, *state))
    }

    /// Adds an event subscriber; it receives every event from now on, in order.
    pub fn subscribe(&mut self, subscriber: impl FnMut(&Event) + Send + 'static) {
        self.subscribers.push(Box::new(subscriber));
    }

    pub(crate) fn emit(&mut self, event: Event) {
        for subscriber in &mut self.subscribers {
            subscriber(&event);
        }
    }

    /// Sends a user message and runs until the model is done or a plan suspends the run.
    ///
    /// A message sent while a plan is pending counts as *not approved*: the suspension is
    /// cancelled (`tool_suspension_cancelled`, the old run ends `aborted`) and the mode stays.
    ///
    /// # Errors
    /// None today; the `Result` leaves room for stores that can fail.
    pub async fn send_message(
        &mut self,
        text: impl Into<String>,
    ) -> Result<RunOutcome, SessionError> {
        self.cancel_pending(CancelReason::UserMessage);
        Ok(self.start_run(text.into()).await)
    }

    /// Decides the pending plan of `run_id` / `tool_call_id` and carries the run on.
    ///
    /// Approved: the model gets `Plan approved. Proceed with implementation following the approved
    /// plan.`, the session switches to the target fixed at submit time (`mode_changed`, reason
    /// `plan_approved`) before the next model call, which uses the new mode's instructions and
    /// tools and is told of the change. Rejected with feedback: the model gets the feedback and
    /// revises in the same mode. Rejected without feedback: the run ends; the mode stays.
    ///
    /// # Errors
    /// [`SessionError::UnknownRun`], [`SessionError::NotSuspended`],
    /// [`SessionError::UnknownToolCall`], [`SessionError::AlreadyDecided`] and
    /// [`SessionError::Sha256Mismatch`]; on error nothing changes.
    pub async fn resume(
        &mut self,
        run_id: &str,
        tool_call_id: &str,
        decision: Decision,
    ) -> Result<RunOutcome, SessionError> {
        self.check_decision(run_id, tool_call_id, &decision)?;
        Ok(self.apply_decision(decision).await)
    }

    /// Like [`Session::resume`] with resume data as JSON (`{"action": "approved"}`, ...).
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`] for resume data of another shape (checked before
    /// anything else), then the errors of [`Session::resume`]; on error nothing changes.
    pub async fn resume_json(
        &mut self,
        run_id: &str,
        tool_call_id: &str,
        data: &Value,
    ) -> Result<RunOutcome, SessionError> {
        let decision = Decision::from_json(data)?;
        self.resume(run_id, tool_call_id, decision).await
    }

    /// Aborts a suspended run: the plan counts as *not approved*, the mode stays. Returns whether
    /// there was a pending plan to abort.
    pub fn abort(&mut self) -> bool {
        self.cancel_pending(CancelReason::Aborted)
    }

    /// Switches to mode `id` by hand; returns whether the mode changed.
    ///
    /// Emits `mode_changed` (reason `manual`); switching to the current mode is a no-op with no
    /// event. A pending plan is cancelled first (`tool_suspension_cancelled`, not approved).
    ///
    /// # Errors
    /// [`SessionError::UnknownMode`] when no mode has this id; nothing changes.
    pub fn switch_mode(&mut self, id: &str) -> Result<bool, SessionError> {
        let target = self
            .shared
            .graph
            .get(id)
            .ok_or_else(|| SessionError::UnknownMode(id.to_owned()))?;
        if target == self.mode {
            return Ok(false);
        }
        self.cancel_pending(CancelReason::ModeSwitch);
        Ok(self.set_mode(target, ModeChangeReason::Manual))
    }

    /// Moves to `target`, emitting `mode_changed` and telling the model; no-op for the same mode.
    pub(crate) fn set_mode(&mut self, target: ModeId, reason: ModeChangeReason) -> bool {
        if target == self.mode {
            return false;
        }
        let previous = self.mode_arc();
        self.mode = target;
        let notice = self.shared.runtime(target).mode_notice(&previous, reason);
        self.messages.push(Message::System { content: notice });
        let mode_id = self.mode_arc();
        self.emit(Event::ModeChanged {
            mode_id,
            previous_mode_id: previous,
            reason,
        });
        true
    }
}
