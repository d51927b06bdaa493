//! The session's task list and its rules, without I/O: what the built-in task tools
//! (`task_write`, `task_update`, `task_complete`, `task_check`: `crate::tool::tasks`) do to
//! the list ([`apply`]), and how an approved plan's numbered steps seed it ([`plan_steps`]).
//!
//! The rules, after Mastra's task tools:
//! - every task has a stable id: one the model gives is kept; one it leaves out in a
//!   `task_write` is the id of the task of the same content in the list before (when exactly
//!   one has it), else a new `task_<slug of the content>` id;
//! - at most one task is `in_progress`: a `task_write` with two is refused; a `task_update` to
//!   `in_progress` puts the task in progress before it back to `pending`;
//! - an unknown id is refused, with the ids the list has; ids repeated in one `task_write` are
//!   refused (Mastra renames them; an error teaches the model better);
//! - the list is bounded: at most [`MAX_TASKS`] tasks, ids of at most [`MAX_ID_CHARS`]
//!   characters, content and `activeForm` of at most [`MAX_TASK_CHARS`].
//!
//! A refused call changes nothing: its error is the model's result, and the session goes on.

use serde_json::Value;

use crate::exchange::tasks::{
    MAX_ID_CHARS, MAX_TASK_CHARS, MAX_TASKS, TASK_CHECK, TASK_COMPLETE, TASK_UPDATE, TASK_WRITE,
    Task, TaskStatus,
};

/// What a task tool call did: the list after it, when it changed, and the result the model
/// reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskOutcome {
    /// The new list; `None` when the call changed nothing (`task_check`).
    pub(crate) tasks: Option<Vec<Task>>,
    /// The result for the model.
    pub(crate) result: String,
}

/// Applies a call of task tool `tool` with `args` to the list `tasks`.
///
/// # Errors
/// The reason for the model when the call is refused (unknown tool or id, repeated ids, two
/// tasks in progress, bounds, malformed arguments); the list is then unchanged.
pub(crate) fn apply(tool: &str, args: &Value, tasks: &[Task]) -> Result<TaskOutcome, String> {
    match tool {
        TASK_WRITE => write(args, tasks).map(|list| changed(list, "Task list written")),
        TASK_UPDATE => update(args, tasks).map(|list| changed(list, "Task updated")),
        TASK_COMPLETE => {
            let id = id_arg(args)?;
            let list = set_status(tasks, id, TaskStatus::Completed)?;
            Ok(changed(list, "Task completed"))
        }
        TASK_CHECK => Ok(TaskOutcome {
            tasks: None,
            result: check(tasks),
        }),
        other => Err(format!("`{other}` is not a task tool")),
    }
}

fn changed(list: Vec<Task>, what: &str) -> TaskOutcome {
    let result = format!("{what}. {}", listing(&list));
    TaskOutcome {
        tasks: Some(list),
        result,
    }
}

/// The list as the model reads it: how many are done, then one line per task with its id.
fn listing(tasks: &[Task]) -> String {
    let done = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    let mut text = format!("[{done}/{} completed]", tasks.len());
    for task in tasks {
        let mark = match task.status {
            TaskStatus::Pending => "[ ]",
            TaskStatus::InProgress => "[~]",
            TaskStatus::Completed => "[x]",
        };
        text.push_str(&format!("\n{mark} {}: {}", task.id, task.content));
    }
    text
}

/// `task_check`'s result: the counts, whether all is done, and the open tasks.
fn check(tasks: &[Task]) -> String {
    if tasks.is_empty() {
        return "No tasks found. Use task_write to make a task list for work of several steps."
            .to_owned();
    }
    let count = |s: TaskStatus| tasks.iter().filter(|t| t.status == s).count();
    let (done, doing, todo) = (
        count(TaskStatus::Completed),
        count(TaskStatus::InProgress),
        count(TaskStatus::Pending),
    );
    let all = done == tasks.len();
    let mut text = format!(
        "Task status: [{done}/{} completed]\n- Completed: {done}\n- In progress: {doing}\n- Pending: {todo}\nAll tasks completed: {}",
        tasks.len(),
        if all { "YES" } else { "NO" }
    );
    if !all {
        text.push_str("\n\nIncomplete tasks:");
        for task in tasks.iter().filter(|t| t.status != TaskStatus::Completed) {
            text.push_str(&format!(
                "\n- {} ({}): {}",
                task.id,
                task.status.as_str(),
                task.content
            ));
        }
        text.push_str("\n\nContinue with these tasks before ending.");
    }
    text
}

/// The first `max` characters of `text`, to quote hostile text in an error.
fn shown(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// A status by its name.
fn parse_status(text: &str) -> Option<TaskStatus> {
    match text {
        "pending" => Some(TaskStatus::Pending),
        "in_progress" => Some(TaskStatus::InProgress),
        "completed" => Some(TaskStatus::Completed),
        _ => None,
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// A text argument of a task, checked: present when `required`, not blank, within bounds.
fn text_field(
    item: &Value,
    key: &str,
    what: &str,
    required: bool,
    max: usize,
) -> Result<Option<String>, String> {
    match item.get(key) {
        None | Some(Value::Null) if !required => Ok(None),
        None | Some(Value::Null) => Err(format!("{what} has no `{key}`")),
        Some(Value::String(text)) => {
            if text.trim().is_empty() {
                return Err(format!("{what} has a blank `{key}`"));
            }
            if chars(text) > max {
                return Err(format!(
                    "{what} has a `{key}` of {} characters, more than {max}: keep it short",
                    chars(text)
                ));
            }
            Ok(Some(text.clone()))
        }
        Some(_) => Err(format!("{what}'s `{key}` must be a string")),
    }
}

fn status_field(item: &Value, what: &str, required: bool) -> Result<Option<TaskStatus>, String> {
    match item.get("status") {
        None | Some(Value::Null) if !required => Ok(None),
        None | Some(Value::Null) => Err(format!("{what} has no `status`")),
        Some(Value::String(s)) => parse_status(s).map(Some).ok_or_else(|| {
            format!(
                "{what}'s `status` must be \"pending\", \"in_progress\" or \"completed\", not {:?}",
                shown(s, 40)
            )
        }),
        Some(_) => Err(format!("{what}'s `status` must be a string")),
    }
}

fn id_arg(args: &Value) -> Result<&str, String> {
    match args.get("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(id),
        _ => Err("`id` must be the id of a task of the list (a non-blank string)".to_owned()),
    }
}

/// The error for an id the list lacks, naming the ids it has.
fn unknown_id(id: &str, tasks: &[Task]) -> String {
    let quoted = shown(id, MAX_ID_CHARS);
    if tasks.is_empty() {
        return format!(
            "Task not found: `{quoted}`: the task list is empty; write it with task_write first"
        );
    }
    let known: Vec<String> = tasks.iter().map(|t| format!("`{}`", t.id)).collect();
    format!(
        "Task not found: `{quoted}`. The known task ids are: {}",
        known.join(", ")
    )
}

const TWO_IN_PROGRESS: &str = "Only one task can be in_progress at a time";

/// `task_write`: the whole new list, checked.
fn write(args: &Value, before: &[Task]) -> Result<Vec<Task>, String> {
    let Some(items) = args.get("tasks").and_then(Value::as_array) else {
        return Err("`tasks` must be an array: the complete task list".to_owned());
    };
    if items.len() > MAX_TASKS {
        return Err(format!(
            "{} tasks are more than {MAX_TASKS}: keep the list to the steps of the work at hand",
            items.len()
        ));
    }
    struct Draft {
        id: Option<String>,
        content: String,
        status: TaskStatus,
        active_form: Option<String>,
    }
    let mut drafts = Vec::with_capacity(items.len());
    for (k, item) in items.iter().enumerate() {
        let what = format!("task {}", k + 1);
        if !item.is_object() {
            return Err(format!("{what} must be an object"));
        }
        let id = text_field(item, "id", &what, false, MAX_ID_CHARS)?;
        let content = text_field(item, "content", &what, true, MAX_TASK_CHARS)?.unwrap_or_default();
        let status = status_field(item, &what, true)?.unwrap_or(TaskStatus::Pending);
        let active_form = text_field(item, "activeForm", &what, false, MAX_TASK_CHARS)?;
        drafts.push(Draft {
            id,
            content,
            status,
            active_form,
        });
    }
    // Repeated ids are refused, naming both places.
    for (k, draft) in drafts.iter().enumerate() {
        let Some(id) = &draft.id else { continue };
        if let Some(first) = drafts[..k].iter().position(|d| d.id.as_ref() == Some(id)) {
            return Err(format!(
                "Task ids must be unique: `{id}` is given to tasks {} and {}. Give each task its own id, or leave `id` out for a new one",
                first + 1,
                k + 1
            ));
        }
    }
    let doing: Vec<usize> = drafts
        .iter()
        .enumerate()
        .filter(|(_, d)| d.status == TaskStatus::InProgress)
        .map(|(k, _)| k + 1)
        .collect();
    if doing.len() > 1 {
        return Err(format!(
            "{TWO_IN_PROGRESS}: tasks {} are all in_progress. Mark one in_progress and the others pending or completed",
            doing
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Ids: given ones first (so none minted takes them), then the previous task's of the same
    // content when exactly one had it, then a new one.
    let mut taken: Vec<String> = drafts.iter().filter_map(|d| d.id.clone()).collect();
    let mut list = Vec::with_capacity(drafts.len());
    for draft in drafts {
        let id = match draft.id {
            Some(id) => id,
            None => {
                let mut same = before.iter().filter(|t| t.content == draft.content);
                let reused = match (same.next(), same.next()) {
                    (Some(task), None) if !taken.contains(&task.id) => Some(task.id.clone()),
                    _ => None,
                };
                let id = reused.unwrap_or_else(|| mint(&draft.content, &taken));
                taken.push(id.clone());
                id
            }
        };
        list.push(Task {
            id,
            active_form: draft.active_form.unwrap_or_else(|| draft.content.clone()),
            content: draft.content,
            status: draft.status,
        });
    }
    Ok(list)
}

/// A new id for a task of `content`: `task_` and the content's first words in lower case,
/// made unique among `taken` with `_2`, `_3`, ...
fn mint(content: &str, taken: &[String]) -> String {
    let mut slug = String::new();
    for c in content.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('_') {
            slug.push('_');
        }
        if slug.len() >= 40 {
            break;
        }
    }
    let slug = slug.trim_end_matches('_');
    let base = if slug.is_empty() {
        "task_item".to_owned()
    } else {
        format!("task_{slug}")
    };
    if !taken.contains(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|id| !taken.contains(id))
        .unwrap_or(base)
}

/// `task_update`: one task's `content`, `status` or `activeForm`, by id.
fn update(args: &Value, tasks: &[Task]) -> Result<Vec<Task>, String> {
    let id = id_arg(args)?;
    let what = "the update";
    let content = text_field(args, "content", what, false, MAX_TASK_CHARS)?;
    let active_form = text_field(args, "activeForm", what, false, MAX_TASK_CHARS)?;
    let status = status_field(args, what, false)?;
    if content.is_none() && active_form.is_none() && status.is_none() {
        return Err("Give `status`, `content` or `activeForm` to change the task".to_owned());
    }
    let mut list = match status {
        Some(status) => set_status(tasks, id, status)?,
        None => {
            if !tasks.iter().any(|t| t.id == id) {
                return Err(unknown_id(id, tasks));
            }
            tasks.to_vec()
        }
    };
    if let Some(task) = list.iter_mut().find(|t| t.id == id) {
        if let Some(content) = content {
            task.content = content;
        }
        if let Some(active_form) = active_form {
            task.active_form = active_form;
        }
    }
    Ok(list)
}

/// The list with task `id` set to `status`; one set `in_progress` puts the task in progress
/// before it back to `pending`.
fn set_status(tasks: &[Task], id: &str, status: TaskStatus) -> Result<Vec<Task>, String> {
    if !tasks.iter().any(|t| t.id == id) {
        return Err(unknown_id(id, tasks));
    }
    Ok(tasks
        .iter()
        .map(|task| {
            let mut task = task.clone();
            if task.id == id {
                task.status = status;
            } else if status == TaskStatus::InProgress && task.status == TaskStatus::InProgress {
                task.status = TaskStatus::Pending;
            }
            task
        })
        .collect())
}

/// The numbered steps of a plan's text, as an approval seeds the task list with them: every
/// line that starts (after any indentation) with a number followed by `.` or `)` and a space
/// or tab, outside fenced code blocks (```` ``` ```` or `~~~`), in order. The rest of the line,
/// trimmed, is the step's content; an empty one is skipped. The steps get the ids `step_1`,
/// `step_2`, ... in order, all `pending`; past [`MAX_TASKS`] steps the rest are left out, and
/// a step longer than [`MAX_TASK_CHARS`] characters is cut there.
///
pub(crate) fn plan_steps(plan: &str) -> Vec<Task> {
    let mut steps = Vec::new();
    let mut fence: Option<&str> = None;
    for line in plan.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            continue;
        }
        let rest = &trimmed[digits..];
        let Some(rest) = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')')) else {
            continue;
        };
        if !rest.starts_with([' ', '\t']) {
            continue;
        }
        let content = rest.trim();
        if content.is_empty() {
            continue;
        }
        if steps.len() == MAX_TASKS {
            break;
        }
        let content: String = content.chars().take(MAX_TASK_CHARS).collect();
        steps.push(Task::new(
            format!("step_{}", steps.len() + 1),
            content,
            TaskStatus::Pending,
        ));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, content: &str, status: TaskStatus) -> Task {
        Task::new(id, content, status)
    }

    fn ids(tasks: &[Task]) -> Vec<&str> {
        tasks.iter().map(|t| t.id.as_str()).collect()
    }

    #[test]
    fn a_write_keeps_given_ids_reuses_those_of_the_same_content_and_mints_the_rest() {
        let before = [task("tests", "Write tests", TaskStatus::Pending)];
        let args = json!({"tasks": [
            {"content": "Update docs", "status": "pending"},
            {"content": "Write tests", "status": "in_progress", "activeForm": "Writing tests"},
            {"id": "task_update_docs", "content": "Other", "status": "pending"},
        ]});
        let out = apply(TASK_WRITE, &args, &before).expect("written");
        let list = out.tasks.expect("changed");
        assert_eq!(
            ids(&list),
            ["task_update_docs_2", "tests", "task_update_docs"]
        );
        assert_eq!(list[1].active_form, "Writing tests");
        assert_eq!(list[0].active_form, "Update docs");
        assert!(out.result.contains("tests: Write tests"), "{}", out.result);
    }

    #[test]
    fn a_write_with_two_tasks_in_progress_is_refused() {
        let args = json!({"tasks": [
            {"id": "a", "content": "A", "status": "in_progress"},
            {"id": "b", "content": "B", "status": "in_progress"},
        ]});
        let err = apply(TASK_WRITE, &args, &[]).expect_err("refused");
        assert!(err.starts_with(TWO_IN_PROGRESS), "{err}");
        assert!(err.contains("tasks 1, 2"), "{err}");
    }

    #[test]
    fn a_write_repeating_an_id_is_refused_naming_both_tasks() {
        let args = json!({"tasks": [
            {"id": "a", "content": "A", "status": "pending"},
            {"id": "b", "content": "B", "status": "pending"},
            {"id": "a", "content": "C", "status": "pending"},
        ]});
        let err = apply(TASK_WRITE, &args, &[]).expect_err("refused");
        assert!(err.contains("`a` is given to tasks 1 and 3"), "{err}");
    }

    #[test]
    fn a_write_past_the_bounds_is_refused() {
        let many: Vec<Value> = (0..10_000)
            .map(|k| json!({"content": format!("t{k}"), "status": "pending"}))
            .collect();
        let err = apply(TASK_WRITE, &json!({ "tasks": many }), &[]).expect_err("refused");
        assert!(err.contains("10000 tasks are more than"), "{err}");
        let big = "x".repeat(10 * 1024 * 1024);
        let args = json!({"tasks": [{"content": big, "status": "pending"}]});
        let err = apply(TASK_WRITE, &args, &[]).expect_err("refused");
        assert!(err.contains("characters, more than"), "{err}");
        let args = json!({"tasks": [{"content": " ", "status": "pending"}]});
        assert!(apply(TASK_WRITE, &args, &[]).is_err());
        let args = json!({"tasks": [{"content": "a", "status": "done"}]});
        assert!(apply(TASK_WRITE, &args, &[]).is_err());
    }

    #[test]
    fn an_update_to_in_progress_demotes_the_task_in_progress() {
        let before = [
            task("a", "A", TaskStatus::InProgress),
            task("b", "B", TaskStatus::Pending),
        ];
        let out = apply(
            TASK_UPDATE,
            &json!({"id": "b", "status": "in_progress"}),
            &before,
        )
        .expect("updated");
        let list = out.tasks.expect("changed");
        assert_eq!(list[0].status, TaskStatus::Pending);
        assert_eq!(list[1].status, TaskStatus::InProgress);
    }

    #[test]
    fn an_unknown_id_is_refused_with_the_known_ones() {
        let before = [
            task("a", "A", TaskStatus::Pending),
            task("b", "B", TaskStatus::Pending),
        ];
        for tool in [TASK_UPDATE, TASK_COMPLETE] {
            let err = apply(tool, &json!({"id": "zz", "status": "completed"}), &before)
                .expect_err("refused");
            assert!(err.contains("Task not found: `zz`"), "{err}");
            assert!(err.contains("`a`, `b`"), "{err}");
        }
    }

    #[test]
    fn complete_marks_one_task_and_check_counts() {
        let before = [
            task("a", "A", TaskStatus::InProgress),
            task("b", "B", TaskStatus::Pending),
        ];
        let out = apply(TASK_COMPLETE, &json!({"id": "a"}), &before).expect("completed");
        let list = out.tasks.expect("changed");
        assert_eq!(list[0].status, TaskStatus::Completed);
        assert_eq!(list[1].status, TaskStatus::Pending);
        let check = apply(TASK_CHECK, &json!({}), &list).expect("checked");
        assert_eq!(check.tasks, None);
        assert!(check.result.contains("[1/2 completed]"), "{}", check.result);
        assert!(check.result.contains("All tasks completed: NO"));
        assert!(check.result.contains("b (pending): B"));
    }

    #[test]
    fn plan_steps_read_numbered_lines_outside_code_fences() {
        let plan = "# T\n1. One\n2) Two\n~~~\n3. In code\n~~~\n  3.\tThree\n4.\n5.Five\n";
        let steps = plan_steps(plan);
        let contents: Vec<&str> = steps.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["One", "Two", "Three"]);
        assert_eq!(ids(&steps), ["step_1", "step_2", "step_3"]);
        let many: String = (1..=1000).map(|k| format!("{k}. s\n")).collect();
        assert_eq!(plan_steps(&many).len(), MAX_TASKS);
    }
}
