//! The built-in task tools, with Mastra's inputs: [`TaskWrite`] (`task_write`: the whole
//! list, `{"tasks": [{"id"?, "content", "status", "activeForm"?}]}`), [`TaskUpdate`]
//! (`task_update`: one task by `id`, with a new `status`, `content` or `activeForm`),
//! [`TaskComplete`] (`task_complete`: one task by `id` marked `completed`) and [`TaskCheck`]
//! (`task_check`: how far the list is done, `{}`).
//!
//! The list belongs to the session: kept in its record (saved in every store, back after a
//! restart), sent whole in a `tasks_updated` event ([`crate::Event::TasksUpdated`]) at each
//! change, shown by the terminal as a checklist and sent over ACP as a `plan` update. The
//! session applies a call itself, by the rules of its pure core (stable ids, at most one task
//! `in_progress`, unknown or repeated ids refused, bounded sizes: [`MAX_TASKS`],
//! [`MAX_TASK_CHARS`], [`MAX_ID_CHARS`]); a refused call is an error result for the model and
//! changes nothing. Run outside a session (no list to keep), a tool returns an error result.
//!
//! A mode offers them when its `availableTools` lists them; the controller then registers all
//! four (each whose name the host has not taken), and, as they change no file, a mode with no
//! list (a planning one too) offers them. When a plan is approved into a mode that offers any
//! of them, the plan's numbered steps become the list (the guide's page `tasks` says how steps are read).
//!
//! # Examples
//! ```
//! use agent_controller::Tool;
//! use agent_controller::tool::ToolAccess;
//! use agent_controller::tool::tasks::{TaskWrite, TASK_TOOLS};
//! assert_eq!(TaskWrite.name(), TASK_TOOLS[0]);
//! assert_eq!(TaskWrite.access(), ToolAccess::ReadOnly, "it changes no file");
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::exchange::ToolOutput;

pub use crate::exchange::tasks::{
    MAX_ID_CHARS, MAX_TASK_CHARS, MAX_TASKS, TASK_CHECK, TASK_COMPLETE, TASK_TOOLS, TASK_UPDATE,
    TASK_WRITE, Task, TaskStatus,
};

use super::{Tool, ToolAccess, ToolContext};

/// Whether `name` is one of the four built-in task tools.
///
/// # Examples
/// ```
/// use agent_controller::tool::tasks::is_task_tool;
/// assert!(is_task_tool("task_update"));
/// assert!(!is_task_tool("todo_write"));
/// ```
pub fn is_task_tool(name: &str) -> bool {
    TASK_TOOLS.contains(&name)
}

/// The four task tools, to register ([`crate::ToolRegistry::register`]); the controller does
/// so on its own when a mode lists one of them.
///
/// # Examples
/// ```
/// use agent_controller::tool::tasks::task_tools;
/// let names: Vec<String> = task_tools().iter().map(|t| t.name().to_owned()).collect();
/// assert_eq!(names, ["task_write", "task_update", "task_complete", "task_check"]);
/// ```
pub fn task_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(TaskWrite),
        Arc::new(TaskUpdate),
        Arc::new(TaskComplete),
        Arc::new(TaskCheck),
    ]
}

fn status_schema() -> Value {
    json!({
        "type": "string",
        "enum": ["pending", "in_progress", "completed"],
        "description": "pending: not started; in_progress: being worked on (one task at a time); completed: done.",
    })
}

// The bounds are in the descriptions, not the schema: the rules refuse what passes them with
// an error that names the bound ([`MAX_TASKS`], [`MAX_TASK_CHARS`], [`MAX_ID_CHARS`]).
fn text_schema(description: &str) -> Value {
    json!({ "type": "string", "description": format!("{description} At most {MAX_TASK_CHARS} characters.") })
}

fn id_schema(description: &str) -> Value {
    json!({ "type": "string", "description": format!("{description} At most {MAX_ID_CHARS} characters.") })
}

/// What a task tool run outside a session returns: there is no list to keep.
fn outside_a_session(name: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "{name} keeps the session's task list; run outside a session, there is none: nothing was changed."
    ))
}

/// `task_write`: replaces the whole task list.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskWrite;

/// `task_update`: changes one task, by id.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskUpdate;

/// `task_complete`: marks one task completed, by id.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskComplete;

/// `task_check`: reads the list and how far it is done.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskCheck;

#[async_trait]
impl Tool for TaskWrite {
    fn name(&self) -> &str {
        TASK_WRITE
    }

    fn description(&self) -> String {
        "Write the task list for the work at hand: pass the COMPLETE list each time (it replaces \
         the one before). Each task has `content` (imperative: \"Fix the login bug\"), `status` \
         (pending, in_progress or completed; only ONE in_progress at a time), an optional \
         `activeForm` (\"Fixing the login bug\") and an optional `id` (keep the ids the result \
         gave you; leave it out for a new task). Mark a task in_progress before starting it and \
         completed as soon as it is done."
            .to_owned()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "description": format!("The complete task list, in order: at most {MAX_TASKS} tasks."),
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": id_schema("The task's id: keep it to keep the task; leave it out for a new one."),
                            "content": text_schema("What to do, in the imperative."),
                            "status": status_schema(),
                            "activeForm": text_schema("What is shown while the task is in progress."),
                        },
                        "required": ["content", "status"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["tasks"],
            "additionalProperties": false,
        })
    }

    /// It changes no file: a planning mode with no tool list offers it.
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        outside_a_session(TASK_WRITE)
    }
}

#[async_trait]
impl Tool for TaskUpdate {
    fn name(&self) -> &str {
        TASK_UPDATE
    }

    fn description(&self) -> String {
        "Change one task of the task list, by its `id`: a new `status` (setting one in_progress \
         puts the task in progress before it back to pending), `content` or `activeForm`."
            .to_owned()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": id_schema("The id of the task to change."),
                "status": status_schema(),
                "content": text_schema("The task's new content."),
                "activeForm": text_schema("The task's new active form."),
            },
            "required": ["id"],
            "additionalProperties": false,
        })
    }

    /// It changes no file: a planning mode with no tool list offers it.
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        outside_a_session(TASK_UPDATE)
    }
}

#[async_trait]
impl Tool for TaskComplete {
    fn name(&self) -> &str {
        TASK_COMPLETE
    }

    fn description(&self) -> String {
        "Mark one task of the task list completed, by its `id`, as soon as it is done.".to_owned()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "id": id_schema("The id of the task that is done.") },
            "required": ["id"],
            "additionalProperties": false,
        })
    }

    /// It changes no file: a planning mode with no tool list offers it.
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        outside_a_session(TASK_COMPLETE)
    }
}

#[async_trait]
impl Tool for TaskCheck {
    fn name(&self) -> &str {
        TASK_CHECK
    }

    fn description(&self) -> String {
        "Check the task list: how many tasks are completed, in progress and pending, whether all \
         are done, and which are not. Use it before ending the work."
            .to_owned()
    }

    fn input_schema(&self) -> Value {
        json!({ "type": "object", "properties": {}, "additionalProperties": false })
    }

    /// It changes nothing: a planning mode with no tool list offers it.
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        outside_a_session(TASK_CHECK)
    }
}
