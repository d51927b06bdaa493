//! The session's events as `session/update` notifications, and the session's modes as ACP
//! modes (the config options are built in `options`).

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, Content, ContentBlock, ContentChunk, CurrentModeUpdate, SessionId,
    SessionMode, SessionModeState, SessionNotification, SessionUpdate, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};

use crate::acp::options::{config_options, model_option};
use crate::controller::AgentController;
use crate::display::{neutralize, neutralize_line_within};
use crate::event::Event;
use crate::event::Suspension;
use crate::machine::run::{cancelled_result, tool_cancelled_result, unanswered_result};
use crate::mode::{ModeGraph, ModeId};
use crate::model::Message;
use crate::session::{CallStatus, PendingDecision, Session};
use crate::tool::SUBMIT_PLAN;
use crate::tool::submit_plan::in_plans_dir;

/// The modes as `session/new` returns them: the current one and every mode with its id, name
/// and description.
pub(crate) fn mode_state(graph: &ModeGraph, current: ModeId) -> SessionModeState {
    let modes = graph
        .modes()
        .iter()
        .map(|m| {
            let description = (!m.description().is_empty()).then(|| m.description().to_owned());
            SessionMode::new(m.id().to_owned(), m.name().to_owned()).description(description)
        })
        .collect();
    SessionModeState::new(graph.mode(current).id().to_owned(), modes)
}

/// The ACP tool-call ids of a session's tool calls. A model may reuse its tool-call ids
/// (`call_1` in every reply), so each call the session starts gets an id of its own, and a
/// later event of the call (its end, its permission request) finds it by the model's id. A
/// subagent's calls are keyed by the child's id and the call's (two children both have a
/// `call_1`, and so may the parent).
#[derive(Debug, Default)]
pub(crate) struct ToolIds {
    next: u64,
    latest: HashMap<(Option<String>, String), String>,
}

impl ToolIds {
    /// A fresh ACP id for the model's call `tool_call_id`.
    fn start(&mut self, tool_call_id: &str) -> String {
        self.start_in(None, tool_call_id)
    }

    /// The ACP id of the latest call with the model's id `tool_call_id` (a fresh one if none
    /// started).
    pub(crate) fn of(&mut self, tool_call_id: &str) -> String {
        self.of_in(None, tool_call_id)
    }

    /// A fresh ACP id for the call `tool_call_id` of the child `child` (`None`: the session's
    /// own call).
    pub(crate) fn start_in(&mut self, child: Option<&str>, tool_call_id: &str) -> String {
        self.next += 1;
        let call = neutralize_line_within(tool_call_id, 64);
        let id = match child {
            Some(child) => format!(
                "{}/{call}#{}",
                neutralize_line_within(child, 120),
                self.next
            ),
            None => format!("{call}#{}", self.next),
        };
        let key = (child.map(str::to_owned), tool_call_id.to_owned());
        self.latest.insert(key, id.clone());
        id
    }

    /// The ACP id of the latest call `tool_call_id` of the child `child` (`None`: the
    /// session's own), a fresh one if none started.
    pub(crate) fn of_in(&mut self, child: Option<&str>, tool_call_id: &str) -> String {
        let key = (child.map(str::to_owned), tool_call_id.to_owned());
        match self.latest.get(&key) {
            Some(id) => id.clone(),
            None => self.start_in(child, tool_call_id),
        }
    }
}

/// Sends one session's updates to the client.
#[derive(Clone)]
pub(crate) struct Updates {
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) session_id: SessionId,
    /// The session's mode as last announced (kept here so a switch can tell it while a run
    /// holds the session).
    pub(crate) mode: Arc<Mutex<String>>,
    pub(crate) graph: ModeGraph,
    /// The session's controller: the models it offers, and each mode's own.
    pub(crate) controller: AgentController,
    pub(crate) workspace: PathBuf,
    /// The plans directory, relative to the workspace (`write_plan`'s paths are relative to it).
    pub(crate) plans_dir: PathBuf,
    pub(crate) ids: Arc<Mutex<ToolIds>>,
    /// What the event stream told so far in this run: whether the model's text streamed (then
    /// `assistant_message` repeats it and is not sent).
    pub(crate) seen: Arc<Mutex<Seen>>,
    /// The model's ids of the calls their tool suspended (questions) that wait: one cancelled
    /// ends as not answered, not as not approved.
    pub(crate) questions: Arc<Mutex<HashSet<String>>>,
}

/// See [`Updates::seen`].
#[derive(Debug, Default)]
pub(crate) struct Seen {
    streamed: bool,
}

impl Updates {
    /// Sends `update`; a connection that is gone is not this session's concern.
    pub(crate) fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Err(error) = self.cx.send_notification(notification) {
            tracing::debug!(%error, "session/update not sent");
        }
    }

    pub(crate) fn ids(&self) -> std::sync::MutexGuard<'_, ToolIds> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn questions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the call the model calls `tool_call_id` is a question that waits (its tool
    /// suspended it).
    pub(crate) fn is_question(&self, tool_call_id: &str) -> bool {
        self.questions().contains(tool_call_id)
    }

    pub(crate) fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's mode as last announced.
    pub(crate) fn mode_id(&self) -> String {
        self.mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Announces the mode `mode_id`: `current_mode_update`, then `config_option_update`, whose
    /// `model` is the new mode's own (a change of mode ends a chosen model).
    pub(crate) fn mode(&self, mode_id: &str) {
        let Some(mode) = self.graph.get(mode_id) else {
            return;
        };
        mode_id.clone_into(&mut self.mode.lock().unwrap_or_else(PoisonError::into_inner));
        self.send(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            mode_id.to_owned(),
        )));
        let model = model_option(
            self.controller.models(),
            self.controller.mode_model_id(mode_id),
        );
        self.send(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            config_options(&self.graph, mode, model),
        )));
    }

    /// The update (or updates) for one event of the session.
    pub(crate) fn on_event(&self, event: &Event) {
        match event {
            Event::AgentStart { .. } => {
                *self.seen() = Seen::default();
            }
            Event::TextDelta { text, .. } => {
                self.seen().streamed = true;
                self.text(text);
            }
            Event::AssistantMessage { text, .. } => {
                let streamed = std::mem::take(&mut self.seen().streamed);
                if !streamed && !text.is_empty() {
                    self.text(text);
                }
            }
            Event::ModeChanged { mode_id, .. } => self.mode(mode_id),
            Event::TasksUpdated { tasks, .. } => self.send(super::plan::plan_update(tasks)),
            // The end of a run of an approved plan: what became of it, as the terminal shows
            // it ([`crate::plan_report::PlanReport::shown`]), as an agent message of its own.
            Event::PlanReport { report, .. } => {
                self.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                    ContentBlock::from(format!("\n\n{}\n", report.shown())),
                )));
            }
            Event::SubagentEvent {
                child_id, event, ..
            } => self.child_event(child_id, event),
            other => self.tool_event(None, other),
        }
    }

    /// A child's event (`child`'s own, wrapped in `subagent_event`): its tool calls reach the
    /// client as tool calls of their own, keyed by the child's id and the call's; a child's
    /// child's by its own id. Its text, modes and task list are the child's business.
    fn child_event(&self, child: &str, event: &Event) {
        match event {
            Event::SubagentEvent {
                child_id, event, ..
            } => self.child_event(child_id, event),
            other => self.tool_event(Some(child), other),
        }
    }

    /// The update for a tool call's event: the session's own call (`child` `None`), or the
    /// call of child `child`, whose title names it.
    fn tool_event(&self, child: Option<&str>, event: &Event) {
        match event {
            Event::ToolStart {
                tool_call_id,
                tool_name,
                args,
                waits_for_approval,
                ..
            } => {
                let id = self.ids().start_in(child, tool_call_id);
                // A call that waits for approval is `pending` from the start: it does not run.
                let status = if *waits_for_approval {
                    ToolCallStatus::Pending
                } else {
                    ToolCallStatus::InProgress
                };
                let mut title = title(tool_name, args);
                if let Some(child) = child {
                    title = format!("{title} (subagent {})", neutralize_line_within(child, 120));
                }
                let call = ToolCall::new(id, title)
                    .kind(kind(tool_name))
                    .status(status)
                    .locations(self.locations(tool_name, args))
                    .raw_input(args.clone());
                self.send(SessionUpdate::ToolCall(call));
            }
            Event::ToolSuspended {
                tool_call_id,
                suspend_payload,
                ..
            } => {
                if matches!(suspend_payload, Suspension::Tool(_)) && child.is_none() {
                    self.questions().insert(tool_call_id.clone());
                }
                // A child's call that waits in this session names the child: it is the call
                // the child announced.
                let child = child.or_else(|| made_by(suspend_payload).map(|s| s.child_id.as_str()));
                let id = self.ids().of_in(child, tool_call_id);
                let mut fields = ToolCallUpdateFields::new().status(ToolCallStatus::Pending);
                // A call that waits for approval: located where its paths lead, resolved as it
                // began to wait (the `tool_call` that announced it had them as typed), before
                // the permission request asks about it.
                if let Suspension::ToolCall(payload) = suspend_payload {
                    let located = super::permission::resolved_locations(payload);
                    if !located.is_empty() {
                        fields = fields.locations(located);
                    }
                }
                self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    id, fields,
                )));
            }
            Event::ToolEnd {
                tool_call_id,
                result,
                is_error,
                decision,
                ..
            } => {
                let status = CallStatus::of_result(*is_error, decision.as_ref());
                let id = self.ids().of_in(child, tool_call_id);
                self.send(SessionUpdate::ToolCallUpdate(ended(id, result, status)));
            }
            Event::ToolSuspensionCancelled {
                tool_call_id,
                tool_name,
                reason,
                ..
            } => {
                // What the model was told, as the replay shows it.
                let result = if tool_name == SUBMIT_PLAN {
                    cancelled_result(*reason)
                } else if child.is_none() && self.questions().remove(tool_call_id) {
                    unanswered_result(*reason)
                } else {
                    tool_cancelled_result(*reason)
                };
                let id = self.ids().of_in(child, tool_call_id);
                self.send(SessionUpdate::ToolCallUpdate(ended(
                    id,
                    result,
                    CallStatus::Failed,
                )));
            }
            _ => {}
        }
    }

    /// Where a file tool's call points the editor: the file, in the workspace; for the plan
    /// tools (`write_plan`, `submit_plan`) the plan file, resolved as they resolve it (a bare
    /// name in the plans directory, any other path relative to the workspace and inside the
    /// plans directory), none when the path is not one they take.
    fn locations(&self, tool_name: &str, args: &serde_json::Value) -> Vec<ToolCallLocation> {
        if tool_name != "write_plan" && tool_name != SUBMIT_PLAN {
            return locations(&self.workspace, args);
        }
        let Some(path) = args.get("path").and_then(|p| p.as_str()) else {
            return Vec::new();
        };
        match in_plans_dir(&self.workspace, &self.plans_dir, path) {
            Some(inside) => vec![ToolCallLocation::new(
                self.workspace.join(&self.plans_dir).join(inside),
            )],
            None => Vec::new(),
        }
    }

    /// Tells the client that the tool call `tool_call_id` ended with `result`, as `status`.
    pub(crate) fn end_call(&self, tool_call_id: &str, result: &str, status: CallStatus) {
        let id = self.ids().of(tool_call_id);
        self.send(SessionUpdate::ToolCallUpdate(ended(id, result, status)));
    }

    /// Tells the client that the call `tool_call_id` (its ACP id) waits for an answer the
    /// next prompt gives: the call stays `pending`, its content and an agent message say what
    /// it asks (`shown`, its hidden characters shown as escapes already) and that the next
    /// prompt is the answer.
    pub(crate) fn waits_for_prompt(&self, tool_call_id: &str, shown: &str) {
        let fields = ToolCallUpdateFields::new()
            .status(ToolCallStatus::Pending)
            .content(vec![ToolCallContent::Content(Content::new(
                shown.trim().to_owned(),
            ))]);
        self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            tool_call_id.to_owned(),
            fields,
        )));
        self.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(shown.to_owned()),
        )));
    }

    fn text(&self, text: &str) {
        self.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(neutralize(text).into_owned()),
        )));
    }

    /// Replays a stored conversation, as `session/load` streams it before it answers: every
    /// prompt as `user_message_chunk`, the agent's text, each tool call as `tool_call`
    /// (`pending`) and, once it has its result, a `tool_call_update` with the result and the
    /// status the library gives it ([`Session::result_statuses`]: a plan not approved is
    /// `failed`). A call without a result stays `pending` while it waits for a decision
    /// ([`Session::pending`]) and is `failed` otherwise; a result whose call was never
    /// announced is announced first. The question the next prompt answers is shown as it is
    /// live ([`Updates::waits_for_prompt`]): its text, and that the next prompt is the answer,
    /// so the user sees what that prompt answers. Last, the session's task list as a `plan` update, when it
    /// has one.
    pub(crate) fn replay(&self, session: &Session) {
        let statuses = session.result_statuses();
        let waiting: HashSet<&str> = session
            .pending()
            .iter()
            .map(PendingDecision::tool_call_id)
            .collect();
        // The calls announced and not answered yet: the model's id, and the ACP id.
        let mut open: Vec<(String, String)> = Vec::new();
        for (message, status) in session.messages().iter().zip(statuses) {
            match message {
                Message::User { content } => {
                    self.send(SessionUpdate::UserMessageChunk(ContentChunk::new(
                        ContentBlock::from(content.clone()),
                    )));
                }
                Message::Assistant {
                    content,
                    tool_calls,
                } => {
                    if !content.is_empty() {
                        self.text(content);
                    }
                    for call in tool_calls {
                        let id = self.ids().start(&call.id);
                        let update = ToolCall::new(id.clone(), title(&call.name, &call.args))
                            .kind(kind(&call.name))
                            .status(ToolCallStatus::Pending)
                            .locations(self.locations(&call.name, &call.args))
                            .raw_input(call.args.clone());
                        self.send(SessionUpdate::ToolCall(update));
                        open.retain(|(model_id, _)| model_id != &call.id);
                        open.push((call.id.clone(), id));
                    }
                }
                Message::Tool {
                    tool_call_id,
                    tool_name,
                    content,
                    is_error,
                } => {
                    let id = match open.iter().position(|(m, _)| m == tool_call_id) {
                        Some(at) => open.remove(at).1,
                        None => {
                            let id = self.ids().start(tool_call_id);
                            let call = ToolCall::new(
                                id.clone(),
                                neutralize_line_within(tool_name, 100).into_owned(),
                            )
                            .kind(kind(tool_name))
                            .status(ToolCallStatus::Pending);
                            self.send(SessionUpdate::ToolCall(call));
                            id
                        }
                    };
                    let status = status.unwrap_or(CallStatus::of_result(*is_error, None));
                    self.send(SessionUpdate::ToolCallUpdate(ended(id, content, status)));
                }
                // The mode notices are for the model; the client sees the modes themselves.
                Message::System { .. } => {}
            }
        }
        for (model_id, id) in open {
            if !waiting.contains(model_id.as_str()) {
                self.send(SessionUpdate::ToolCallUpdate(ended(
                    id,
                    "No result was recorded for this call: it did not run to its end.",
                    CallStatus::Failed,
                )));
            }
        }
        if let Some(question) = super::question::answered_by_prompt(session) {
            let id = self.ids().of(question.tool_call_id());
            let text = super::question::next_prompt_text(question.payload());
            self.waits_for_prompt(&id, &text);
        }
        // The task list as it stands, once: the editor shows the plan it had.
        if !session.tasks().is_empty() {
            self.send(super::plan::plan_update(session.tasks()));
        }
    }
}

/// The subagent whose call `suspension` is, when a child's call waits in its parent's session.
pub(crate) fn made_by(suspension: &Suspension) -> Option<&crate::subagent::SubagentOrigin> {
    match suspension {
        Suspension::ToolCall(payload) => payload.subagent.as_deref(),
        Suspension::Tool(payload) => payload.subagent.as_deref(),
        Suspension::Plan(_) => None,
    }
}

/// A tool call's status as ACP writes it.
pub(crate) fn status(status: CallStatus) -> ToolCallStatus {
    match status {
        CallStatus::Pending => ToolCallStatus::Pending,
        CallStatus::Completed => ToolCallStatus::Completed,
        CallStatus::Failed => ToolCallStatus::Failed,
    }
}

/// A tool call's end: its status, with its result as text.
fn ended(id: String, result: &str, call_status: CallStatus) -> ToolCallUpdate {
    let status = status(call_status);
    let fields =
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![ToolCallContent::Content(Content::new(
                super::permission::as_code(result),
            ))]);
    ToolCallUpdate::new(id, fields)
}

/// What kind of tool a tool is, for the editor's icon: by the built-in tools' names, else
/// `other`.
pub(crate) fn kind(tool_name: &str) -> ToolKind {
    match tool_name {
        "read_file" => ToolKind::Read,
        "list_files" => ToolKind::Search,
        "write_file" | "write_plan" => ToolKind::Edit,
        SUBMIT_PLAN => ToolKind::SwitchMode,
        _ => ToolKind::Other,
    }
}

/// A tool call's title: the tool and its `path` argument when it has one, on one line.
fn title(tool_name: &str, args: &serde_json::Value) -> String {
    let tool = neutralize_line_within(tool_name, 100);
    match args.get("path").and_then(|p| p.as_str()) {
        Some(path) => format!("{tool} {}", neutralize_line_within(path, 200)),
        None => tool.into_owned(),
    }
}

/// The file a file tool's `path` argument names, as an absolute path in the workspace; none
/// when the path is absolute or climbs out with `..` (the model's path is not trusted to point
/// the editor anywhere: the jail refuses such a path anyway).
fn locations(workspace: &Path, args: &serde_json::Value) -> Vec<ToolCallLocation> {
    let Some(path) = args.get("path").and_then(|p| p.as_str()) else {
        return Vec::new();
    };
    let relative = Path::new(path);
    let inside = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside || path.is_empty() {
        return Vec::new();
    }
    vec![ToolCallLocation::new(workspace.join(relative))]
}
