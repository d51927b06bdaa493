//! The session's task list as the terminal shows it: a checklist
//! ([`Style::render_tasks`]).

use termimad::crossterm::style::Stylize;

use crate::display::neutralize_line_within;
use crate::tool::tasks::{MAX_TASK_CHARS, Task, TaskStatus};

use super::Style;

impl Style {
    /// The task list `tasks` as a checklist: a heading with how many are done, then one line
    /// per task, in order: `[x]` completed, `[~]` in progress (its content first, then its
    /// `activeForm` when it differs), `[ ]` pending, each with its id. Every text is the
    /// model's, so it is shown on one line with every character visible
    /// ([`crate::display::neutralize_line_within`]) and each run of white space as one space
    /// (spaces could push what follows out of sight); nothing is cut below the tasks' own
    /// bound. With colours on, the task in progress is yellow and bold
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
    ///     "tasks (1/3 completed):\n  [x] Add the flag (step_1)\n  [~] Wire the toggle — Wiring the toggle (step_2)\n  [ ] Test\\u{1b}[2J (step_3)",
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
            let content = shown(&task.content);
            // In progress, the task shows its content, then its `activeForm`: the form could
            // otherwise pass for what the task does.
            let form = shown(&task.active_form);
            let text = match task.status {
                TaskStatus::InProgress if !form.is_empty() && form != content => {
                    format!("{content} — {form}")
                }
                _ => content,
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

/// `text` as a checklist line shows it: each run of white space one space, the ends trimmed,
/// every character visible.
fn shown(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    neutralize_line_within(&words.join(" "), MAX_TASK_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial F14: the content comes first (an `activeForm` cannot pass for it), and runs of
    /// white space are one space (they cannot push text out of sight).
    #[test]
    fn the_content_comes_first_and_white_space_is_collapsed() {
        let mut doing = Task::new("b", "Fix   the\tbug", TaskStatus::InProgress);
        doing.active_form = "Reading the docs".into();
        let padded = Task::new(
            "c",
            format!("Test{}rm -rf /", " ".repeat(300)),
            TaskStatus::Pending,
        );
        let shown = Style::plain(80).render_tasks(&[doing, padded]);
        assert_eq!(
            shown,
            "tasks (0/2 completed):\n  [~] Fix the bug — Reading the docs (b)\n  [ ] Test rm -rf / (c)"
        );
    }
}
