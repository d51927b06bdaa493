//! Which tool call a result answers ([`CallRef`]): the rules address results, approvals and
//! refusals by it.

use std::sync::Arc;

/// The tool call a result answers: its run, the model's id of the call, and the tool called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallRef {
    /// The running run.
    pub(crate) run_id: Arc<str>,
    /// The model's id of the call.
    pub(crate) call_id: String,
    /// The tool called.
    pub(crate) name: String,
}

impl CallRef {
    /// Call `call_id` of tool `name` in run `run_id`.
    pub(crate) fn new(
        run_id: Arc<str>,
        call_id: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            run_id,
            call_id: call_id.into(),
            name: name.into(),
        }
    }
}
