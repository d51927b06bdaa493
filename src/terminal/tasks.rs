//! The session's task list as the terminal shows it: a checklist
//! ([`Style::render_tasks`]).

use termimad::crossterm::style::Stylize;

use crate::display::neutralize_line_within;
use crate::tool::tasks::{MAX_TASK_CHARS, Task, TaskStatus};

use super::Style;

impl Style {
    /// The task list `tasks` as a checklist: a heading with how many are done, then one line
    /// per task, in order: `[x]` completed, `[~]` in progress (with its `activeForm`, then its content when they differ), `[ ]`
    /// pending, each with its id. Every text is the model's, so it is shown on one line with
    /// every character visible ([`crate::display::neutralize_line_within`]); nothing is cut
    /// below the tasks' own bound. With colours on, the task in progress is yellow and bold
    /// and completed ones green.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::Style;
    /// use agent_controller::tool::tasks::{Task, TaskStatus};
    /// let mut doing = Task::new("step_2", "Wire the toggle", TaskStatus::InProgress);
    /// doing.active_form = "Wiring the toggle".into();
    /// let tasks = [Task::new("step_1", "Add the flag", TaskStatus::Completed), doing,
    ///     Task::new("step_3", "Test\u{1b}[2J", TaskStatus::Pending)];
    /// assert_eq!(
    ///     Style::plain(80).render_tasks(&tasks),
    ///     "tasks (1/3 completed):\n  [x] Add the flag (step_1)\n  [~] Wiring the toggle — Wire the toggle (step_2)\n  [ ] Test\\u{1b}[2J (step_3)",
    /// );
    /// assert_eq!(Style::plain(80).render_tasks(&[]), "tasks: none");
    /// ```
    pub fn render_tasks(&self, tasks: &[Task]) -> String {
        if tasks.is_empty() {
            return "tasks: none".to_owned();
        }
        let done = tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Completed)
            .count();
        let mut lines = vec![format!("tasks ({done}/{} completed):", tasks.len())];
        for task in tasks {
            let mark = match task.status {
                TaskStatus::Completed => "[x]",
                TaskStatus::InProgress => "[~]",
                TaskStatus::Pending => "[ ]",
            };
            let content = neutralize_line_within(&task.content, MAX_TASK_CHARS);
            // In progress, the task shows its `activeForm` and its content: the form alone
            // could hide what the task does.
            let text = match task.status {
                TaskStatus::InProgress if task.active_form != task.content => format!(
                    "{} — {content}",
                    neutralize_line_within(&task.active_form, MAX_TASK_CHARS)
                ),
                _ => content.into_owned(),
            };
            let line = format!(
                "{mark} {text} ({})",
                neutralize_line_within(&task.id, MAX_TASK_CHARS)
            );
            let line = match (self.color, task.status) {
                (true, TaskStatus::InProgress) => line.yellow().bold().to_string(),
                (true, TaskStatus::Completed) => line.green().to_string(),
                _ => line,
            };
            lines.push(format!("  {line}"));
        }
        lines.join("\n")
    }
}
