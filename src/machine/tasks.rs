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
use crate::plan::markdown::lines_outside_code;

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
            if tasks
                .iter()
                .any(|t| t.id == id && t.status == TaskStatus::Completed)
            {
                // Nothing changes, so no new list goes out.
                return Ok(TaskOutcome {
                    tasks: None,
                    result: format!("Task `{id}` was already completed. {}", listing(tasks)),
                });
            }
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
            // Blank as `ask_user` sees it: only spaces or characters that show nothing.
            if crate::display::is_blank(text) {
                return Err(format!("{what} has a blank `{key}`: it shows nothing"));
            }
            if chars(text) > max {
                return Err(format!(
                    "{what} has {} `{key}` of {} characters, more than {max}: keep it short",
                    article(key),
                    chars(text)
                ));
            }
            if key == "id" {
                check_id(text).map_err(|why| format!("{what}'s `id` {why}"))?;
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

/// `a` or `an`, for the name of a field in an error.
fn article(key: &str) -> &'static str {
    if key.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// An id the model gives must be one it (and the user) can read back: shown as typed, with no
/// control, bidi or invisible character (which [`crate::display::neutralize_line`] escapes).
fn check_id(id: &str) -> Result<(), String> {
    if crate::display::neutralize_line(id) == id {
        return Ok(());
    }
    Err(format!(
        "{} has a control, bidi or invisible character: use letters, digits, `_` and `-`",
        crate::display::neutralize_line_within(id, 60)
    ))
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
/// or tab, outside fenced code blocks, in order. The rest of the line, trimmed, is the step's
/// content; one that shows nothing ([`crate::display::is_blank`]) is skipped. Each step's id
/// keeps the plan's own number (`3. X` is `step_3`, `02.` is `step_2`), so the model and the
/// user find the step the plan numbers; a number the list already has (a nested or second
/// list) gets the next free suffix (`step_1_2`). All are `pending`.
///
/// Fences follow CommonMark ([`lines_outside_code`]), so the steps are the ones a Markdown
/// renderer shows the user outside code.
///
/// The list holds at most [`MAX_TASKS`] steps and [`MAX_TASK_CHARS`] characters of each:
/// [`PlanSteps`] says how many the plan has and which were cut, so that the model and the
/// user are told ([`PlanSteps::told`]).
pub(crate) fn plan_steps(plan: &str) -> PlanSteps {
    let mut steps = PlanSteps::default();
    for line in lines_outside_code(plan) {
        let Some((number, content)) = step_text(line) else {
            continue;
        };
        steps.total += 1;
        if steps.tasks.len() == MAX_TASKS {
            steps.left_out.get_or_insert(number);
            continue;
        }
        let id = step_id(number, &steps.tasks);
        let content = if chars(content) > MAX_TASK_CHARS {
            steps.cut.push(id.clone());
            let mut kept: String = content.chars().take(MAX_TASK_CHARS - 1).collect();
            kept.push(CUT_MARK);
            kept
        } else {
            content.to_owned()
        };
        steps
            .tasks
            .push(Task::new(id, content, TaskStatus::Pending));
        steps.numbers.push(number);
    }
    steps
}

/// What ends a step's text that was cut at [`MAX_TASK_CHARS`].
pub(crate) const CUT_MARK: char = '…';

/// The steps a plan seeds the task list with ([`plan_steps`]), and what did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PlanSteps {
    /// The list: the first [`MAX_TASKS`] steps.
    pub(crate) tasks: Vec<Task>,
    /// How many numbered steps the plan has, those left out past [`MAX_TASKS`] included.
    pub(crate) total: usize,
    /// The ids of the steps whose text was cut at [`MAX_TASK_CHARS`] (it ends in [`CUT_MARK`]).
    pub(crate) cut: Vec<String>,
    /// The plan's number of the first step left out past [`MAX_TASKS`].
    pub(crate) left_out: Option<u64>,
    /// The plan's own number of each step of `tasks`, in the same order.
    pub(crate) numbers: Vec<u64>,
    /// The plan's numbers of the steps the approval left out (it approved only some):
    /// not in `tasks` ([`PlanSteps::only`]).
    pub(crate) not_approved: Vec<u64>,
}

impl PlanSteps {
    /// What the approval's result tells the model (and the host shows the user): the list it
    /// now has, and, when the plan did not fit, how many steps were left out or cut and why.
    /// A plan without steps tells that the list is now empty.
    pub(crate) fn told(&self) -> String {
        let seeded = self.tasks.len();
        let (first, last) = match (self.tasks.first(), self.tasks.last()) {
            (Some(first), Some(last)) => (&first.id, &last.id),
            _ => {
                return "The plan has no numbered steps: your task list is now empty (write one with task_write if the work has steps).".to_owned();
            }
        };
        let ids = match seeded {
            1 => format!("id `{first}`"),
            _ => format!("ids `{first}` to `{last}`"),
        };
        let mut text = if !self.not_approved.is_empty() {
            format!(
                "The plan's approved steps are now your task list, all pending ({ids}), and only those."
            )
        } else if self.total > seeded {
            format!(
                "Only the first {seeded} of the plan's {} numbered steps are now your task list, all pending ({ids}): a task list holds at most {MAX_TASKS} tasks.",
                self.total
            )
        } else if seeded == 1 {
            format!("The plan's numbered step is now your task list, pending ({ids}).")
        } else {
            format!(
                "The plan's {seeded} numbered steps are now your task list, all pending ({ids})."
            )
        };
        text.push_str(
            " Mark each in_progress with task_update before you start it, and task_complete when it is done.",
        );
        if self.total > seeded {
            text.push_str(&format!(
                " The plan's other {} numbered steps (from its step number {} on) are not in the list, and task_check does not count them: once the list is done, carry them out from the approved plan.",
                self.total - seeded,
                self.left_out.unwrap_or_default()
            ));
        }
        if !self.not_approved.is_empty() {
            text.push_str(&format!(
                " Not approved, so not in the list: the plan's step numbers {}; do not carry them out.",
                numbers_listed(&self.not_approved)
            ));
        }
        if !self.cut.is_empty() {
            let ids: Vec<String> = self.cut.iter().map(|id| format!("`{id}`")).collect();
            text.push_str(&format!(
                " The text of {} was cut at {MAX_TASK_CHARS} characters (it ends in `{CUT_MARK}`): read the step whole in the approved plan.",
                ids.join(", ")
            ));
        }
        text
    }
}

impl PlanSteps {
    /// The same steps, keeping only those of `approved` (the plan's numbers an approval
    /// chose): the list holds them alone, `not_approved` the rest (steps past [`MAX_TASKS`]
    /// included: none is left to carry out from the plan).
    pub(crate) fn only(mut self, approved: &[u64], not_approved: &[u64]) -> Self {
        let (mut tasks, mut numbers) = (Vec::new(), Vec::new());
        for (task, number) in self.tasks.into_iter().zip(self.numbers) {
            if approved.contains(&number) {
                tasks.push(task);
                numbers.push(number);
            }
        }
        self.cut.retain(|id| tasks.iter().any(|t| &t.id == id));
        self.total = tasks.len();
        self.left_out = None;
        self.tasks = tasks;
        self.numbers = numbers;
        self.not_approved = not_approved.to_vec();
        self
    }
}

/// The id of the step the plan numbers `number`: `step_N`, or, when `tasks` already has
/// that id, `step_N_2`, `step_N_3`, ... (the first free one).
fn step_id(number: u64, tasks: &[Task]) -> String {
    let taken = |id: &str| tasks.iter().any(|t| t.id == id);
    let id = format!("step_{number}");
    if !taken(&id) {
        return id;
    }
    (2..)
        .map(|k| format!("step_{number}_{k}"))
        .find(|id| !taken(id))
        .unwrap_or(id)
}

/// The number and text of a numbered step `line` (`1. text`, `2) text`, indented or not), the
/// text trimmed; `None` when the line is no step or its text shows nothing.
pub(crate) fn step_text(line: &str) -> Option<(u64, &str)> {
    let trimmed = line.trim_start();
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    // At most nine ASCII digits: a number that fits.
    let number = trimmed[..digits].parse::<u64>().ok()?;
    let rest = &trimmed[digits..];
    let rest = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')'))?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let content = rest.trim();
    (!crate::display::is_blank(content)).then_some((number, content))
}

/// `numbers` as a person reads them: `1, 2, 3, 5` (`none` for none; past 30, the count of the
/// rest).
pub(crate) fn numbers_listed(numbers: &[u64]) -> String {
    if numbers.is_empty() {
        return "none".to_owned();
    }
    let shown: Vec<String> = numbers.iter().take(30).map(u64::to_string).collect();
    match numbers.len() {
        n if n > 30 => format!("{} and {} more", shown.join(", "), n - 30),
        _ => shown.join(", "),
    }
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

    /// Trial 5 (L1, L11): text that shows nothing is blank as `ask_user` sees it; an id the
    /// model must repeat is shown as typed (no control, bidi or invisible character); the
    /// error names the field with its article.
    #[test]
    fn invisible_text_and_ids_that_do_not_show_as_typed_are_refused() {
        for blank in ["\u{200b}\u{3164}", "\u{202e}\u{202e}", " \u{feff} "] {
            let args = json!({"tasks": [{"content": blank, "status": "pending"}]});
            let err = apply(TASK_WRITE, &args, &[]).expect_err("blank content");
            assert!(err.contains("blank `content`"), "{err}");
            let args =
                json!({"tasks": [{"content": "a", "status": "pending", "activeForm": blank}]});
            assert!(apply(TASK_WRITE, &args, &[]).is_err(), "blank activeForm");
            let before = [task("a", "A", TaskStatus::Pending)];
            let args = json!({"id": "a", "content": blank});
            assert!(apply(TASK_UPDATE, &args, &before).is_err(), "blank update");
        }
        for id in ["x\u{1b}[2J", "a\u{200b}", "\u{202e}b"] {
            let args = json!({"tasks": [{"id": id, "content": "A", "status": "pending"}]});
            let err = apply(TASK_WRITE, &args, &[]).expect_err("hidden id");
            assert!(err.contains("`id`"), "{err}");
        }
        let args = json!({"tasks": [{"id": "x".repeat(500), "content": "A", "status": "pending"}]});
        let err = apply(TASK_WRITE, &args, &[]).expect_err("long id");
        assert!(
            err.contains("task 1 has an `id` of 500 characters"),
            "{err}"
        );
    }

    /// Trial 5 (L11): completing a completed task changes nothing and says so.
    #[test]
    fn completing_a_completed_task_changes_nothing() {
        let before = [task("a", "A", TaskStatus::Completed)];
        let out = apply(TASK_COMPLETE, &json!({"id": "a"}), &before).expect("no error");
        assert_eq!(out.tasks, None, "no new list, no tasks_updated");
        assert!(out.result.contains("already completed"), "{}", out.result);
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

    fn contents(steps: &[Task]) -> Vec<&str> {
        steps.iter().map(|t| t.content.as_str()).collect()
    }

    /// The trial's plans: a fence closes only on the same character, at least as long, with
    /// no info string, indented less than 4 spaces; an indented line is no fence.
    #[test]
    fn plan_steps_follow_commonmark_fences() {
        let nested = "# F\n\n````\n1. in fence\n```\n2. in fence too\n````\n3. after fence\n2024. year line\n";
        assert_eq!(
            contents(&plan_steps(nested).tasks),
            ["after fence", "year line"]
        );
        let indented = "# G\n\n~~~\n1. a\n~~~\n3. after\n    ```\n4. lost\n";
        assert_eq!(contents(&plan_steps(indented).tasks), ["after", "lost"]);
        let info = "```rust\n1. code\n```rust\n2. code\n```\n3. step\n";
        assert_eq!(contents(&plan_steps(info).tasks), ["step"]);
        let other =
            "~~~~\n1. code\n```\n2. code\n~~~\n3. code\n    ~~~~\n4. code\n   ~~~~~  \n5. step\n";
        assert_eq!(contents(&plan_steps(other).tasks), ["step"]);
        let tab = "\t```\n1. step\n``` `x`\n2. step\n";
        assert_eq!(contents(&plan_steps(tab).tasks), ["step", "step"]);
    }

    /// The trial's long plans: every step is counted, those past the list's bound are named
    /// as left out, and a step cut at the bound is marked as cut.
    #[test]
    fn plan_steps_say_what_did_not_fit() {
        let many: String = (1..=250).map(|k| format!("{k}. step {k}\n")).collect();
        let steps = plan_steps(&many);
        assert_eq!(steps.tasks.len(), MAX_TASKS);
        assert_eq!(steps.total, 250);
        let told = steps.told();
        assert!(
            told.contains("Only the first 200 of the plan's 250 numbered steps"),
            "{told}"
        );
        assert!(
            told.contains("other 50 numbered steps (from its step number 201 on)"),
            "{told}"
        );
        let long = format!("1. short\n2. {}\n", "x".repeat(5_000));
        let steps = plan_steps(&long);
        let cut = &steps.tasks[1].content;
        assert_eq!(chars(cut), MAX_TASK_CHARS);
        assert!(cut.ends_with(CUT_MARK), "a cut step is marked");
        assert_eq!(steps.cut, ["step_2"]);
        assert!(
            steps.told().contains("The text of `step_2` was cut"),
            "{}",
            steps.told()
        );
        let exact = format!("1. {}\n", "y".repeat(MAX_TASK_CHARS));
        let steps = plan_steps(&exact);
        assert!(steps.cut.is_empty());
        assert_eq!(chars(&steps.tasks[0].content), MAX_TASK_CHARS);
        let fits = plan_steps("1. a\n2. b\n").told();
        assert!(
            fits.starts_with("The plan's 2 numbered steps are now your task list"),
            "{fits}"
        );
        assert!(!fits.contains("cut") && !fits.contains("Only"), "{fits}");
    }

    /// A step that shows nothing (invisible characters only) is no step, as `ask_user` refuses
    /// such a question.
    #[test]
    fn plan_steps_skip_steps_that_show_nothing() {
        let plan = "1. One\n2. \u{200b}\n3. \u{3164}\u{202e}\n4. Four\n";
        assert_eq!(contents(&plan_steps(plan).tasks), ["One", "Four"]);
    }

    /// A line of a plan and whether it is a step that must be read.
    #[derive(Debug, Clone)]
    enum Block {
        /// A numbered step outside any fence.
        Step(String),
        /// A fenced block: its opening fence character, length, indentation and info string,
        /// the lines inside (numbered lines and lines that look like fences but do not close
        /// it), and the closing fence's extra length and indentation.
        Fenced {
            mark: char,
            len: usize,
            indent: usize,
            info: bool,
            inside: Vec<usize>,
            close_extra: usize,
            close_indent: usize,
        },
        /// A line that looks like a fence but is indented 4 or more: no fence.
        Indented(char, usize),
    }

    fn block() -> impl proptest::strategy::Strategy<Value = Block> {
        use proptest::prelude::*;
        let mark = prop_oneof![Just('`'), Just('~')];
        prop_oneof![
            "[a-z]{1,8}".prop_map(Block::Step),
            (
                mark.clone(),
                3usize..7,
                0usize..4,
                any::<bool>(),
                proptest::collection::vec(0usize..6, 0..6),
                0usize..3,
                0usize..4
            )
                .prop_map(
                    |(mark, len, indent, info, inside, close_extra, close_indent)| {
                        Block::Fenced {
                            mark,
                            len,
                            indent,
                            info,
                            inside,
                            close_extra,
                            close_indent,
                        }
                    }
                ),
            (mark, 4usize..8).prop_map(|(m, i)| Block::Indented(m, i)),
        ]
    }

    /// The plan's text for `blocks`, and the steps a CommonMark reader finds in it.
    fn render(blocks: &[Block]) -> (String, Vec<String>) {
        let mut text = String::from("# Plan\n\n");
        let mut steps = Vec::new();
        for (k, block) in blocks.iter().enumerate() {
            match block {
                Block::Step(word) => {
                    let word = format!("{word} {k}");
                    text.push_str(&format!("{}. {word}\n", k + 1));
                    steps.push(word);
                }
                Block::Fenced {
                    mark,
                    len,
                    indent,
                    info,
                    inside,
                    close_extra,
                    close_indent,
                } => {
                    let fence = mark.to_string().repeat(*len);
                    let other = if *mark == '`' { "~" } else { "`" };
                    text.push_str(&format!(
                        "{}{fence}{}\n",
                        " ".repeat(*indent),
                        if *info { "rust" } else { "" }
                    ));
                    for shape in inside {
                        // Each is code: a numbered line, or a line that does not close.
                        let line = match shape {
                            0 => "1. code".to_owned(),
                            1 => mark.to_string().repeat(len - 1),
                            2 => other.repeat(*len + 1),
                            3 => format!("{fence}rust"),
                            4 => format!("    {fence}"),
                            _ => format!("{fence} x"),
                        };
                        text.push_str(&line);
                        text.push('\n');
                        text.push_str("2) code too\n");
                    }
                    text.push_str(&format!(
                        "{}{}  \n",
                        " ".repeat(*close_indent),
                        mark.to_string().repeat(len + close_extra)
                    ));
                }
                Block::Indented(mark, indent) => {
                    text.push_str(&format!(
                        "{}{}\n",
                        " ".repeat(*indent),
                        mark.to_string().repeat(3)
                    ));
                }
            }
        }
        (text, steps)
    }

    proptest::proptest! {
        /// Whatever fences a plan has, the steps are its numbered lines outside them, in order.
        #[test]
        fn plan_steps_are_the_numbered_lines_outside_fences(
            blocks in proptest::collection::vec(block(), 0..12)
        ) {
            let (text, expected) = render(&blocks);
            let steps = plan_steps(&text).tasks;
            proptest::prop_assert_eq!(contents(&steps), expected, "{}", text);
        }
    }

    /// Trial F11: the ids keep the plan's own numbers: a skipped (blank) step leaves its number
    /// out, a plan may start at 2, and a number a nested list repeats gets a suffix.
    #[test]
    fn plan_steps_keep_the_plans_own_numbers() {
        let skipped = plan_steps("1. One\n2. \u{200b}\n3. Three\n");
        assert_eq!(ids(&skipped.tasks), ["step_1", "step_3"]);
        assert!(
            skipped.told().contains("(ids `step_1` to `step_3`)"),
            "{}",
            skipped.told()
        );
        let late = plan_steps("Done already: step 1.\n\n2. Two\n3. Three\n");
        assert_eq!(ids(&late.tasks), ["step_2", "step_3"]);
        let padded = plan_steps("07. Seven\n");
        assert_eq!(ids(&padded.tasks), ["step_7"]);
        assert!(padded.told().contains("(id `step_7`)"), "{}", padded.told());
        let nested = plan_steps("1. One\n   1. Sub\n   2. Sub two\n2. Two\n1. Again\n");
        assert_eq!(
            ids(&nested.tasks),
            ["step_1", "step_1_2", "step_2", "step_2_2", "step_1_3"]
        );
        let mut many = String::new();
        for k in 1..=(MAX_TASKS as u64 + 2) {
            many.push_str(&format!("{}. s\n", k * 10));
        }
        let told = plan_steps(&many).told();
        assert!(told.contains("(from its step number 2010 on)"), "{told}");
    }

    #[test]
    fn plan_steps_read_numbered_lines_outside_code_fences() {
        let plan = "# T\n1. One\n2) Two\n~~~\n3. In code\n~~~\n  3.\tThree\n4.\n5.Five\n";
        let steps = plan_steps(plan).tasks;
        let contents: Vec<&str> = steps.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["One", "Two", "Three"]);
        assert_eq!(ids(&steps), ["step_1", "step_2", "step_3"]);
    }
}
