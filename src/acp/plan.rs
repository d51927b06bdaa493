//! The session's task list as ACP's `plan` session update: editors show it as the agent's
//! plan, with each entry's progress.

use agent_client_protocol::v1::schema::{
    Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
};

use crate::display::neutralize_line_within;
use crate::tool::tasks::{MAX_TASK_CHARS, Task, TaskStatus};

/// `line` (one line of the model's text) as Markdown that shows it as written: an editor
/// renders a plan entry's content, so a task could otherwise forge structure (a heading, a
/// link, emphasis, a checkbox, raw HTML). Every character that is Markdown inline syntax is
/// escaped with a backslash (CommonMark 2.4: any ASCII punctuation may be), and so is what
/// would open a block at the start (`#`, `>`, `-`, `+`, `=`, a list number's `.` or `)`);
/// leading spaces are dropped (four would make a code block).
pub(crate) fn markdown_text(line: &str) -> String {
    const INLINE: &[char] = &[
        '\\', '`', '*', '_', '[', ']', '<', '>', '!', '&', '~', '|', '(', ')', '{', '}', '#',
    ];
    let line = line.trim_start();
    let mut out = String::with_capacity(line.len() + 8);
    // A list number at the start: its digits, then its `.` or `)` escaped.
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    for (at, c) in line.chars().enumerate() {
        let opens_block = at == 0 && matches!(c, '-' | '+' | '=')
            || (at == digits && digits > 0 && matches!(c, '.' | ')'));
        if INLINE.contains(&c) || opens_block {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The `plan` update for the whole list `tasks` (ACP sends the whole plan each time): one
/// entry per task, in order, with its content (on one line, control characters made visible,
/// as every text of the model is, and Markdown escaped: [`markdown_text`]), its status, and
/// priority `medium` (the tasks carry none).
pub(crate) fn plan_update(tasks: &[Task]) -> SessionUpdate {
    let entries = tasks
        .iter()
        .map(|task| {
            let status = match task.status {
                TaskStatus::Pending => PlanEntryStatus::Pending,
                TaskStatus::InProgress => PlanEntryStatus::InProgress,
                TaskStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(
                markdown_text(&neutralize_line_within(&task.content, MAX_TASK_CHARS)),
                PlanEntryPriority::Medium,
                status,
            )
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_is_an_entry_with_its_status_and_medium_priority() {
        let tasks = [
            Task::new("a", "Read\u{1b}[2J", TaskStatus::Completed),
            Task::new("b", "Write", TaskStatus::InProgress),
            Task::new("c", "Test", TaskStatus::Pending),
        ];
        let json = serde_json::to_value(plan_update(&tasks)).expect("json");
        assert_eq!(json["sessionUpdate"], "plan");
        let entries = json["entries"].as_array().expect("entries");
        let shown: Vec<(&str, &str, &str)> = entries
            .iter()
            .map(|e| {
                (
                    e["content"].as_str().unwrap_or_default(),
                    e["status"].as_str().unwrap_or_default(),
                    e["priority"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(shown[1], ("Write", "in_progress", "medium"));
        assert_eq!(shown[2], ("Test", "pending", "medium"));
        assert_eq!(shown[0].1, "completed");
        assert!(!shown[0].0.contains('\u{1b}'), "{}", shown[0].0);
    }

    /// Trial F6: a task that looks like Markdown reaches the editor escaped, on one line: no
    /// heading, link, emphasis, checkbox or HTML of the model's making.
    #[test]
    fn a_markdown_looking_task_is_escaped() {
        let tasks = [Task::new(
            "a",
            "# Done **all** [ok](http://x) <b>\n- [x] approved",
            TaskStatus::Pending,
        )];
        let json = serde_json::to_value(plan_update(&tasks)).expect("json");
        assert_eq!(
            json["entries"][0]["content"],
            "\\# Done \\*\\*all\\*\\* \\[ok\\]\\(http://x\\) \\<b\\>\\\\u\\{a\\}- \\[x\\] approved"
        );
        assert_eq!(markdown_text("1. one"), "1\\. one");
        assert_eq!(markdown_text("    - two"), "\\- two");
        assert_eq!(markdown_text("Add the flag."), "Add the flag.");
    }
}
