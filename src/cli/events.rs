//! The event lines `run`, `decide` and `continue` print: JSON, or readable text.

use std::sync::Arc;

use agent_controller::display::{
    arguments_line, json_line, neutralize_line, neutralize_line_within,
};
use agent_controller::terminal::Style;
use agent_controller::tool::SUBMIT_PLAN;
use agent_controller::tool::tasks::TASK_TOOLS;

/// The built-in question tool's name.
const ASK_USER: &str = "ask_user";
use agent_controller::{Event, ModeGraph, event::Suspension};

use crate::cli::text::{PENDING_ARGS_MAX_CHARS, deadline_note, short_sha256, targets_text};

/// The event subscriber of `run`, `decide` and `continue`: JSON lines, or readable lines where
/// modes show as their coloured labels on a terminal. Text from the model, tools and files is
/// neutralised. With `resuming` (`decide`, `continue`), every run is one that carries on: each
/// `agent_start` says "resumed".
pub(crate) fn event_printer(
    json: bool,
    graph: ModeGraph,
    resuming: bool,
) -> impl FnMut(&Event) + Send + 'static {
    let style = Style::for_stdout();
    let mut started: Vec<Arc<str>> = Vec::new();
    // The calls their tool suspended to be answered (questions), not approved.
    let mut asked: Vec<String> = Vec::new();
    move |event| {
        if let Event::ToolSuspended {
            tool_call_id,
            suspend_payload: Suspension::Tool(_),
            ..
        } = event
        {
            asked.push(tool_call_id.clone());
        }
        // A question cut off is not answered (a tool call is not approved).
        if let (
            Event::ToolSuspensionCancelled {
                tool_call_id,
                tool_name,
                reason,
                ..
            },
            false,
        ) = (event, json)
            && (asked.contains(tool_call_id) || tool_name == ASK_USER)
        {
            say!(
                "{} cancelled ({reason}): not answered",
                neutralize_line(tool_name)
            );
            return;
        }
        // A run resumed after a decision starts again with the same id: say "resumed".
        let resumed = match event {
            Event::AgentStart { .. } if resuming => true,
            Event::AgentStart { run_id, .. } if started.contains(run_id) => true,
            Event::AgentStart { run_id, .. } => {
                started.push(run_id.clone());
                false
            }
            _ => false,
        };
        print_event(event, json, &graph, &style, resumed)
    }
}

pub(crate) fn print_event(
    event: &Event,
    json: bool,
    graph: &ModeGraph,
    style: &Style,
    resumed: bool,
) {
    if json {
        if let Ok(line) = json_line(event) {
            say!("{line}");
        }
        return;
    }
    if let Some(line) = event_line(event, graph, style, resumed) {
        say!("{line}");
    }
}

/// How many characters of a model's message an event line shows (its middle cut and counted
/// past it; `--json` events have it whole). Other fields: [`neutralize_line`]'s bound.
const MESSAGE_MAX_CHARS: usize = 4_000;

/// Where an event line's cut arguments are shown whole.
const EVENTS_WHOLE: &str = "`--json` shows them whole";

/// One event as a readable line; model-, tool- and file-derived text through [`neutralize_line`]
/// (bounded, the cut counted).
pub(crate) fn event_line(
    event: &Event,
    graph: &ModeGraph,
    style: &Style,
    resumed: bool,
) -> Option<String> {
    // On a terminal, modes show as their coloured labels; piped output keeps the bare ids.
    let mode = |id: &str| match graph.get(id) {
        Some(m) if style.is_colored() => style.mode_label(graph.mode(m)),
        _ => neutralize_line(id).into_owned(),
    };
    let line = |text: &str| neutralize_line(text).into_owned();
    Some(match event {
        Event::SessionStarted {
            session_id,
            mode_id,
        } => format!(
            "session {} started in mode {}",
            line(session_id),
            mode(mode_id)
        ),
        Event::AgentStart {
            run_id, mode_id, ..
        } => {
            let verb = if resumed { "resumed" } else { "started" };
            format!("[{}] {verb} in mode {}", line(run_id), mode(mode_id))
        }
        Event::AssistantMessage { text, .. } => {
            format!("model: {}", neutralize_line_within(text, MESSAGE_MAX_CHARS))
        }
        Event::ToolStart {
            tool_name, args, ..
        } => format!(
            "tool {} {}",
            line(tool_name),
            arguments_line(args, PENDING_ARGS_MAX_CHARS, EVENTS_WHOLE)
        ),
        Event::ToolSuspended {
            suspend_payload: Suspension::ToolCall(call),
            ..
        } => {
            let by = deadline_note(&call.terms)
                .map_or(String::new(), |note| format!(" {}", line(&note)));
            format!(
                "tool call waits for approval: {} {} (decision {}, argsSha256 {}){by}",
                line(&call.tool_name),
                arguments_line(&call.args, PENDING_ARGS_MAX_CHARS, EVENTS_WHOLE),
                line(&call.decision_id),
                line(&call.args_sha256)
            )
        }
        Event::ToolSuspended {
            suspend_payload: Suspension::Plan(suspend_payload),
            ..
        } => {
            let choice = match suspend_payload.target_mode_ids.as_slice() {
                [_, _, ..] => format!(
                    " (approve to: {})",
                    line(&targets_text(
                        &suspend_payload.target_mode_id,
                        &suspend_payload.target_mode_ids
                    ))
                ),
                _ => String::new(),
            };
            let by = deadline_note(&suspend_payload.terms)
                .map_or(String::new(), |note| format!(" {}", line(&note)));
            format!(
                "plan submitted: \"{}\" ({}), sha256 {}; waiting for a decision{choice}{by}",
                line(&suspend_payload.submission.title),
                line(&suspend_payload.submission.path),
                line(&suspend_payload.submission.sha256)
            )
        }
        Event::ToolEnd {
            tool_name,
            result,
            is_error,
            decision,
            ..
        } => {
            let status = if *is_error { "error" } else { "ok" };
            // An approved edit says so: the result reads the same for the plan as submitted.
            let edited = decision
                .as_ref()
                .and_then(|d| d.approved_sha256.as_deref())
                .map(|sha| format!(" (the edited plan, sha256 {}...)", line(short_sha256(sha))))
                .unwrap_or_default();
            // `submit_plan`'s own result (a hand-over, a rejection with the user's feedback and
            // comments) and a task tool's (the list, a task a line) are the controller's text
            // of several lines: shown as lines.
            if (tool_name == SUBMIT_PLAN || TASK_TOOLS.contains(&tool_name.as_ref())) && !*is_error
            {
                return Some(format!(
                    "tool {} {status}: {}",
                    line(tool_name),
                    plan_result_lines(result, &edited)
                ));
            }
            // Every line of the result (the user's feedback included), bounded with the cut
            // counted: `neutralize_line`.
            format!(
                "tool {} {status}: {}{edited}",
                line(tool_name),
                line(result)
            )
        }
        Event::ModeChanged {
            mode_id,
            previous_mode_id,
            reason,
            ..
        } => format!(
            "mode changed: {} -> {} ({reason})",
            mode(previous_mode_id),
            mode(mode_id)
        ),
        Event::ToolSuspensionCancelled {
            tool_name, reason, ..
        } => format!("{} cancelled ({reason}): not approved", line(tool_name)),
        Event::AgentEnd { run_id, reason, .. } => format!("[{}] ended: {reason}", line(run_id)),
        Event::TasksUpdated { tasks, .. } => style.render_tasks(tasks),
        Event::HookDecided {
            tool_name, hook, ..
        } => format!(
            "hook {} on {}: {}{}",
            line(&hook.hook),
            line(tool_name),
            hook.decision,
            match (&hook.reason, &hook.error) {
                (_, Some(error)) => format!(" (failed: {})", line(error)),
                (Some(reason), None) => format!(" ({})", line(reason)),
                (None, None) => String::new(),
            }
        ),
        Event::PlanReport { report, .. } => report.shown(),
        Event::Error { message, .. } => format!("error: {}", line(message)),
        Event::SubagentStarted {
            agent_type,
            child_id,
            ..
        } => format!("subagent {} started ({})", line(agent_type), line(child_id)),
        // A child's own lines, indented under the parent's call, each labelled with the
        // child's id: children of one reply run at once, and their lines interleave.
        Event::SubagentEvent {
            event, child_id, ..
        } => {
            let child = line(child_id);
            event_line(event, graph, style, false)?
                .lines()
                .map(|l| format!("    [{child}] {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Event::SubagentEnded {
            agent_type,
            child_id,
            outcome,
            ..
        } => format!(
            "subagent {} ended: {outcome} ({})",
            line(agent_type),
            line(child_id)
        ),
        _ => return None,
    })
}

/// How many lines after the first a `submit_plan` result shows (each bounded as
/// [`neutralize_line`] bounds it); `--json` has the rest.
const PLAN_RESULT_MAX_LINES: usize = 40;

/// A `submit_plan` (or task tool) result as a person reads it (trial finding D1: the hand-over was one line of
/// 900 characters with `\u{a}` for each line feed): its first line (then `edited`, the note of
/// an approved edit), and each further line that is not blank on a line of its own, indented,
/// every line through [`neutralize_line`], at most [`PLAN_RESULT_MAX_LINES`] of them. The approved plan, which the person was shown whole
/// before approving it, is one line saying how many lines it has (`--json` has them).
fn plan_result_lines(result: &str, edited: &str) -> String {
    use agent_controller::tool::submit_plan::{APPROVED_PLAN_BEGIN, APPROVED_PLAN_END};
    let mut lines = result.split('\n');
    let mut out = format!(
        "{}{edited}",
        neutralize_line(lines.next().unwrap_or_default())
    );
    // The lines of the approved plan passed so far, while inside it.
    let mut in_plan: Option<usize> = None;
    // The further lines shown, and those left out past the bound.
    let (mut shown, mut left_out) = (0, 0);
    for text in lines {
        match in_plan {
            Some(count) if text.starts_with(APPROVED_PLAN_END) => {
                out.push_str(&format!(
                    "\n  (the approved plan, {count} lines, as shown above; `--json` has them)"
                ));
                in_plan = None;
            }
            Some(count) => {
                in_plan = Some(count + 1);
                continue;
            }
            None if text == APPROVED_PLAN_BEGIN => {
                in_plan = Some(0);
            }
            None => {}
        }
        if text.trim().is_empty() {
            continue;
        }
        if shown == PLAN_RESULT_MAX_LINES {
            left_out += 1;
            continue;
        }
        shown += 1;
        out.push_str("\n  ");
        out.push_str(&neutralize_line(text));
    }
    if left_out > 0 {
        out.push_str(&format!(
            "\n  ({left_out} more lines not shown; `--json` has them)"
        ));
    }
    // A plan section with no end line: its lines are counted all the same.
    if let Some(count) = in_plan {
        out.push_str(&format!(
            "\n  (the approved plan, {count} lines, as shown above; `--json` has them)"
        ));
    }
    out
}
