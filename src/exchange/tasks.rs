//! The task list's types, shared by the task tools (`crate::tool::tasks`, which re-exports
//! them), the session's core (`crate::machine::tasks`, the rules), the events and the session
//! record.

use serde::{Deserialize, Serialize};

/// The built-in tool that replaces the whole task list.
pub const TASK_WRITE: &str = "task_write";
/// The built-in tool that changes one task, by id.
pub const TASK_UPDATE: &str = "task_update";
/// The built-in tool that marks one task completed, by id.
pub const TASK_COMPLETE: &str = "task_complete";
/// The built-in tool that reads the task list and how far it is done.
pub const TASK_CHECK: &str = "task_check";
/// The four built-in task tools.
pub const TASK_TOOLS: [&str; 4] = [TASK_WRITE, TASK_UPDATE, TASK_COMPLETE, TASK_CHECK];

/// The most tasks a list holds.
pub const MAX_TASKS: usize = 200;
/// The longest task id, in characters.
pub const MAX_ID_CHARS: usize = 100;
/// The longest `content` or `activeForm` of a task, in characters.
pub const MAX_TASK_CHARS: usize = 2_000;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    Pending,
    /// Being worked on: at most one task of a list at a time.
    InProgress,
    /// Done.
    Completed,
}

impl TaskStatus {
    /// The name the tools and the events use: `pending`, `in_progress` or `completed`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::tasks::TaskStatus;
    /// assert_eq!(TaskStatus::InProgress.as_str(), "in_progress");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
        }
    }
}

/// One task of a session's list, as the task tools, the `tasks_updated` event and the session
/// record carry it.
///
/// # Examples
/// ```
/// use agent_controller::tool::tasks::{Task, TaskStatus};
/// let task = Task::new("step_1", "Write the tests", TaskStatus::Pending);
/// assert_eq!(
///     serde_json::to_value(&task).unwrap(),
///     serde_json::json!({"id": "step_1", "content": "Write the tests", "status": "pending", "activeForm": "Write the tests"}),
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's id, stable while the task is in the list.
    pub id: String,
    /// What to do, in the imperative ("Fix the login bug").
    pub content: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// What is shown while it is in progress ("Fixing the login bug"); the content when the
    /// model gave none.
    #[serde(default)]
    pub active_form: String,
}

impl Task {
    /// A task with `content` as its `activeForm` too.
    pub fn new(id: impl Into<String>, content: impl Into<String>, status: TaskStatus) -> Self {
        let content = content.into();
        Task {
            id: id.into(),
            active_form: content.clone(),
            content,
            status,
        }
    }
}
