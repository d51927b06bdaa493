//! What the driver does next ([`Next`]) once an input's change is saved and its events are
//! delivered: the third effect of the core's entry point (`src/machine/input.rs`).

use std::sync::Arc;

use super::pending::{PendingSuspension, PendingToolCall};
use crate::event::{DecidedRecord, SuspendPayload};
use crate::model::ModelError;

/// An approved tool call with its audit record, to run once every call of its reply is decided.
pub(crate) type Approved = (PendingToolCall, DecidedRecord);

/// A call its tool suspended, answered (the answer on it), with its audit record: the driver
/// hands the answer to the tool's `resume` step.
pub(crate) type Answered = (PendingSuspension, DecidedRecord);

/// What the driver does once an input's change is saved and its events delivered.
#[derive(Debug)]
pub(crate) enum Next {
    /// Nothing more: the change is all.
    Nothing,
    /// Call the model for run `run_id`, in the current mode.
    CallModel(Arc<str>),
    /// Run the tool calls of the assistant message at `at`, in order ([`Input::ModelReply`](super::input::Input::ModelReply)):
    /// the driver's loop runs them in the run it called the model for, then calls it again.
    RunToolCalls {
        /// The assistant message's position in the conversation.
        at: usize,
    },
    /// Run these approved tool calls in the model's order, then call the model
    /// ([`Input::Decide`](super::input::Input::Decide), once every call of the reply is decided).
    RunApproved {
        /// The resumed run.
        run_id: Arc<str>,
        /// The approved calls with their audit records.
        calls: Vec<Approved>,
        /// The answered suspensions with their audit records: each answer goes to its tool's
        /// `resume` step.
        answered: Vec<Answered>,
        /// The children whose waiting calls were decided, each with its decided calls (their
        /// records name the child): each carries on with them, and its final text is its
        /// `subagent` call's result.
        children: Vec<ResumedChild>,
    },
    /// The model is done: end the run with its text ([`Input::ModelReply`](super::input::Input::ModelReply) without tool calls).
    Complete {
        /// The running run.
        run_id: Arc<str>,
        /// The model's last text.
        text: String,
    },
    /// The run waits for a decision on the plan of `submit_plan` call `tool_call_id`
    /// ([`Suspend::Plan`](super::input::Suspend::Plan)).
    SuspendedOnPlan {
        /// The suspended run.
        run_id: Arc<str>,
        /// The `submit_plan` call.
        tool_call_id: String,
        /// The captured plan, as `tool_suspended` carried it (boxed: the other steps are small).
        payload: Box<SuspendPayload>,
    },
    /// The run waits for decisions on tool calls ([`Suspend::ToolCalls`](super::input::Suspend::ToolCalls), or a decision while
    /// other calls of the reply wait).
    WaitsOnToolCalls(Arc<str>),
    /// Every call of the reply is decided, but an answered call's tool is not in this host: the
    /// run stays suspended with the answers recorded, for the host that has the tool to carry
    /// on ([`Input::CarryOn`](super::input::Input::CarryOn)).
    WaitsForHost(Arc<str>),
    /// A decision ended the run: completed (a plan rejected without feedback), or failed with
    /// this error (past the run's revision limit).
    Ended {
        /// The run that ended.
        run_id: Arc<str>,
        /// The revision limit's error, when it failed the run.
        error: Option<ModelError>,
    },
}

/// A child whose calls waited in the session, with its decisions: the pending decisions as the
/// user decided them (each with its record, and an answer where one was given).
pub(crate) type ResumedChild = (
    super::state::WaitingChild,
    Vec<super::pending::PendingDecision>,
);
