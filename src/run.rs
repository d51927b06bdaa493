//! The run loop: model call -> tool calls -> model call ..., until the model is done, a plan
//! suspends the run, or the run fails; and the decision that resumes a suspended run.
//!
//! Run ids are per session: `run_1`, `run_2`, ... count the runs of one session, so every session
//! has a `run_1`. A host that tracks runs of several sessions keys them by (session id, run id);
//! [`crate::ToolContext`] and [`crate::ModelRequest`] carry both, and every event a session
//! emits belongs to that session.
//!
//! The types a run's callers use ([`Decision`], [`PendingDecision`], [`RunOutcome`]) are
//! defined with the session, whose operations take and return them, and re-exported here.

pub use crate::session::{
    Decision, DecisionAction, PendingDecision, PendingPlan, PendingToolCall, RunOutcome,
};
