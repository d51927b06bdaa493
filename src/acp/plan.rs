//! The session's task list as ACP's `plan` session update: editors show it as the agent's
//! plan, with each entry's progress.

use agent_client_protocol::v1::schema::{
    Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
};

use crate::display::neutralize;
use crate::tool::tasks::{Task, TaskStatus};

/// The `plan` update for the whole list `tasks` (ACP sends the whole plan each time): one
/// entry per task, in order, with its content (control characters made visible, as every text
/// of the model is), its status, and priority `medium` (the tasks carry none).
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
                neutralize(&task.content).into_owned(),
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
}
