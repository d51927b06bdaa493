//! The approval prompt on the terminal.

use agent_controller::allowance::AllowanceScope;
use agent_controller::display::neutralize_line;
use agent_controller::event::SuspensionKind;
use agent_controller::terminal::editor::Editor;
use agent_controller::terminal::{
    PromptAnswer, Question, RevisionView, RevisionsShown, StdinLines, Style, ask_suspension,
    render_tool_call,
};
use agent_controller::tool::submit_plan::{self};
use agent_controller::{Decision, ModeGraph, PendingDecision, Session, event::SuspendPayload};

use crate::cli::text::{deadline_note, plan_origin, short_sha256};

/// What the person at the prompt chose: a decision, or a switch of mode by hand instead (`s
/// MODE` at a plan's question).
#[derive(Debug)]
pub(crate) enum Reply {
    /// Decide what waits.
    Decide(Decision),
    /// Switch to this mode by hand: what waits counts as not approved.
    Switch(String),
}

/// The approval prompt on the terminal: the plan rendered on stderr, answers from stdin, edits
/// in the user's editor.
pub(crate) struct Prompt {
    pub(crate) style: Style,
    pub(crate) input: StdinLines,
    pub(crate) graph: ModeGraph,
    pub(crate) editor: Editor,
    /// `--model-for-next`: the model an approval at the prompt names until `m` changes it.
    pub(crate) model_for_next: Option<String>,
    /// The plan revisions this prompt has shown: a revision whose previous one is among them is
    /// shown as its diff (with `p` for the whole); any other is shown whole first.
    shown: RevisionsShown,
}

impl Prompt {
    pub(crate) fn new(graph: ModeGraph) -> Self {
        Self {
            style: Style::for_stderr(),
            input: StdinLines::spawn(),
            graph,
            editor: Editor::from_env(),
            model_for_next: None,
            shown: RevisionsShown::default(),
        }
    }

    /// Shows what waits (a plan, tool call `nth` of the `of` that wait, or a question) and asks
    /// about it; `None` when end of input or Ctrl-C dismissed the prompt, or `q` left a tool
    /// call (no decision). A decision is pinned to the sha256 of what was shown; at a plan, `s MODE`
    /// asks for a switch by hand instead.
    pub(crate) async fn ask(
        &mut self,
        session: &Session,
        pending: &PendingDecision,
        nth: usize,
        of: usize,
    ) -> Option<Reply> {
        let mut stderr = std::io::stderr();
        let answer = match pending {
            PendingDecision::ToolCall(call) => {
                note!(
                    "\n{}",
                    render_tool_call(&self.style, call.payload(), nth, of)
                );
                if let Some(workspace) = &call.payload().terms.workspace {
                    note!(
                        "workspace: {} (where the call runs if approved)",
                        neutralize_line(&workspace.display().to_string())
                    );
                }
                // `a` approves this call only: the other calls of the reply are asked about,
                // each shown whole first.
                Question::tool_call(&self.style, call.tool_name(), call.args_sha256())
                    .asked_by_rule(call.payload().rule.as_deref())
                    .viewable(call.args())
                    .ask(&mut self.input, &mut stderr, tokio::signal::ctrl_c())
                    .await
            }
            // A question of `ask_user`, or another tool's suspension: its payload shown, the
            // typed line read into an answer that fits the schema.
            PendingDecision::Suspension(suspended) => {
                let _ = std::io::Write::write_all(&mut stderr, b"\n");
                let answer = ask_suspension(
                    suspended.payload(),
                    &mut self.input,
                    &mut stderr,
                    tokio::signal::ctrl_c(),
                )
                .await;
                let what = match answer {
                    PromptAnswer::Decided(decision) => return Some(Reply::Decide(decision)),
                    PromptAnswer::Interrupted => "interrupted",
                    _ => "end of input",
                };
                note!(
                    "{what}: the {} {} ({}) is not answered",
                    match suspended.kind() {
                        SuspensionKind::Question => "question",
                        _ => "suspended call",
                    },
                    neutralize_line(pending.decision_id()),
                    neutralize_line(pending.tool_name())
                );
                return None;
            }
            _ => {
                let payload = pending.as_plan()?.payload();
                self.plan_question(session, payload, &mut stderr).await
            }
        };
        if let (Some(notice), Some(_)) = (answer.notice(session.mode().id()), pending.as_plan()) {
            note!("{notice}");
            return None;
        }
        let what = match answer {
            PromptAnswer::Decided(decision) => return Some(Reply::Decide(decision)),
            PromptAnswer::Switch(mode) => return Some(Reply::Switch(mode)),
            PromptAnswer::EndOfInput => "end of input",
            PromptAnswer::Interrupted => "interrupted",
            PromptAnswer::Left => "left for later",
        };
        note!(
            "{what}: the tool call {} ({}) is not decided and does not run",
            neutralize_line(pending.decision_id()),
            neutralize_line(pending.tool_name())
        );
        None
    }

    /// Shows the plan of `payload` and asks the plan's question: a revision whose previous one
    /// this prompt showed as what changed since then (`p` shows it whole), any other whole
    /// (a revision's diff after it, as an addition).
    async fn plan_question(
        &mut self,
        session: &Session,
        payload: &SuspendPayload,
        stderr: &mut std::io::Stderr,
    ) -> PromptAnswer {
        let graph = &self.graph;
        let mut targets: Vec<&agent_controller::mode::Mode> = payload
            .target_mode_ids
            .iter()
            .filter_map(|id| graph.get(id).map(|t| graph.mode(t)))
            .collect();
        if targets.is_empty() {
            let target = graph
                .get(&payload.target_mode_id)
                .map_or_else(|| session.mode(), |id| graph.mode(id));
            targets.push(target);
        }
        let whole = self
            .style
            .render_plan(&payload.submission.title, &payload.submission.plan);
        let mut origin = plan_origin(&payload.submission.path, &payload.submission.sha256);
        if let Some(note) = deadline_note(&payload.terms) {
            origin = format!("{origin}\n{}", neutralize_line(&note));
        }
        origin = format!(
            "{origin}\nworkspace: {} (where an approval carries the run on)",
            neutralize_line(&session.workspace().display().to_string())
        );
        // What an approval grants the next mode: the plan's `## Files`, by `planScope`.
        if let Some(scope) = &payload.scope {
            origin = format!(
                "{origin}\n{}",
                neutralize_line(&scope.grants(&payload.target_mode_id, payload.plan_scope))
            );
        }
        let sha256 = &payload.submission.sha256;
        let plan_text = submit_plan::revision_text(&payload.submission);
        // A manual switch may go to any other mode of the config (`Session::switch_mode`).
        let others: Vec<&agent_controller::mode::Mode> = graph
            .modes()
            .iter()
            .filter(|m| m.id() != session.mode().id())
            .collect();
        // An approval switches mode, which ends the allowances of scope `mode` only: those of
        // scope `session` and `workspace` survive, to apply again back in their own mode.
        let mut ending: Vec<String> = Vec::new();
        for allowance in session.allowances() {
            if allowance.scope == AllowanceScope::Mode && !ending.contains(&allowance.tool_name) {
                ending.push(allowance.tool_name);
            }
        }
        // `m MODEL` is checked when typed, by the chooser an approval would build it with.
        let check_model = |id: &str| -> Result<(), String> {
            session.check_model(id).map_err(|e| match e {
                agent_controller::SessionError::UnknownModel { reason, .. } => reason,
                other => other.to_string(),
            })
        };
        let mut question = Question::new(&self.style, &targets, sha256)
            .editable(&plan_text, &self.editor)
            .ending_allowances(&ending)
            .switchable(&others)
            .commentable(&plan_text)
            .choosing_model()
            .checking_model(&check_model)
            .starting_model(self.model_for_next.as_deref());
        let previous = payload.previous_sha256.as_deref().unwrap_or_default();
        match self.shown.show(payload) {
            // A revision after one this prompt showed: what changed; `p` shows it whole.
            RevisionView::Diff(diff) => {
                note!(
                    "\nrevision {} of the plan \"{}\", changes since revision {} (sha256 {}...):\n{}\n{origin}",
                    payload.revision,
                    neutralize_line(&payload.submission.title),
                    payload.revision.saturating_sub(1),
                    neutralize_line(short_sha256(previous)),
                    self.style.render_diff(diff)
                );
                question = question.whole_plan(&whole);
            }
            // A revision after one this prompt never showed: the whole plan, then the diff.
            RevisionView::WholeThenDiff(diff) => note!(
                "\nrevision {} of the plan:\n\n{whole}\n\nchanges since revision {} (sha256 {}...), which was not shown here:\n{}\n{origin}",
                payload.revision,
                payload.revision.saturating_sub(1),
                neutralize_line(short_sha256(previous)),
                self.style.render_diff(diff)
            ),
            RevisionView::Whole => note!("\n{whole}\n{origin}"),
        }
        if let Some(text) = comments_text(payload) {
            note!("{text}");
        }
        // What the mode's reviewer said (it advises, or it escalated): beside the plan.
        if let Some(review) = &payload.review {
            note!("{}", review.shown());
        }
        question
            .ask(&mut self.input, stderr, tokio::signal::ctrl_c())
            .await
    }
}

/// The comments the user made on the previous revision (shown beside the next one's diff), or
/// `None` when it made none.
pub(crate) fn comments_text(payload: &SuspendPayload) -> Option<String> {
    if payload.comments.is_empty() {
        return None;
    }
    let mut text = format!(
        "your comments on revision {}:",
        payload.revision.saturating_sub(1)
    );
    for c in &payload.comments {
        text.push_str(&format!(
            "\n  line {}: {}\n    {}",
            c.line,
            c.quote,
            neutralize_line(&c.text)
        ));
    }
    Some(text)
}

/// What `session` waits on and is not decided yet (the plan, or tool calls in the model's
/// order).
pub(crate) fn waiting(session: &Session) -> Vec<PendingDecision> {
    session
        .pending()
        .iter()
        .filter(|c| c.is_waiting())
        .cloned()
        .collect()
}
