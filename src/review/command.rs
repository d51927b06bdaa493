//! A `[[reviewers]]` entry with a `command` ([`CommandReviewer`], feature `command-hooks`): run
//! as a `[[hooks]]` command is (the same runner: in the workspace, without a shell, bounded in
//! time and output), one JSON object on stdin ([`super::ReviewRequest`]), one JSON object on
//! stdout, `{"decision": "approve" | "reject" | "escalate", "reason": "..."}`. Everything that is
//! not one well-formed answer in time counts as escalate, saying why.

use super::{ReviewError, ReviewRequest, ReviewVerdict, Reviewer, parse_answer};

/// A [`Reviewer`] that runs a command for each request.
///
/// # Examples
/// ```
/// use agent_controller::review::command::CommandReviewer;
/// let reviewer = CommandReviewer::new(
///     vec!["python3".into(), "review/check.py".into()],
///     std::time::Duration::from_secs(30),
/// );
/// # let _ = reviewer;
/// ```
#[derive(Debug, Clone)]
pub struct CommandReviewer {
    command: Vec<String>,
    timeout: std::time::Duration,
}

impl CommandReviewer {
    /// The reviewer that runs `command` (the program, then its arguments), stopped after
    /// `timeout`.
    pub fn new(command: Vec<String>, timeout: std::time::Duration) -> Self {
        Self { command, timeout }
    }
}

#[async_trait::async_trait]
impl Reviewer for CommandReviewer {
    async fn review(&self, request: &ReviewRequest) -> Result<ReviewVerdict, ReviewError> {
        let input = serde_json::to_vec(request)
            .map_err(|e| ReviewError::new(format!("the request could not be written: {e}")))?;
        let out = crate::hook::command::run_command(
            &self.command,
            self.timeout,
            &request.workspace,
            input,
        )
        .await
        .map_err(|e| ReviewError::new(e.message()))?;
        let text =
            std::str::from_utf8(&out).map_err(|_| ReviewError::new("its answer is not UTF-8"))?;
        parse_answer(text)
    }
}
