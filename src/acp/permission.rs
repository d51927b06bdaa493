//! What a pending decision looks like as `session/request_permission`, and what the client's
//! answer decides: the options offered, each with the verdict it stands for, so an answer can
//! only ever pick a verdict that was offered.

use agent_client_protocol::v1::schema::{
    Content, Meta, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionResponse, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::json;

use crate::display::{arguments_whole, neutralize, neutralize_line, neutralize_line_within};
use crate::event::ToolCallPayload;
use crate::mode::ModeGraph;
use crate::session::{Decision, PendingPlan, PendingToolCall};

/// The id of the option that rejects (a plan: "Keep planning"; a tool call: "Reject").
pub(crate) const REJECT: &str = "reject";
/// The id of the option that runs a tool call once.
pub(crate) const ALLOW: &str = "allow";
/// The id of the option that runs a tool call and allows its tool until the mode changes.
pub(crate) const ALLOW_ALWAYS: &str = "allow_always";
/// The prefix of a plan's allow options: `switch:MODE`, one per target mode.
pub(crate) const SWITCH_PREFIX: &str = "switch:";

/// What an option, once selected, decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Approve: a plan to this target mode, a tool call (and its tool always, with `always`).
    Approve {
        /// The plan's target mode; `None` for a tool call.
        to: Option<String>,
        /// Always allow the tool until the mode changes (tool calls only).
        always: bool,
        /// A plan's steps approved, when the client named some (`_meta.steps` of the selected
        /// outcome, [`Offer::answer`]): only those ([`Decision::steps`]).
        steps: Option<Vec<u64>>,
    },
    /// Reject: the plan is not approved (the mode stays), the tool call does not run, the
    /// question is not answered (the tool is told the user declined).
    Reject,
    /// Answer a suspended call (a question) with this answer.
    Answer(serde_json::Value),
}

/// The options of one permission request, each with its verdict.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    pub(crate) options: Vec<(PermissionOption, Verdict)>,
    /// The plan the options decide, against which steps a client names are checked.
    pub(crate) plan: Option<Box<PendingPlan>>,
}

/// How the client answered a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It selected an option that was offered.
    Selected(Verdict),
    /// The `cancelled` outcome (the client cancelled the turn).
    Cancelled,
    /// An answer that cannot be taken, and why: an option id that was not offered, or form
    /// content that does not fit the answer's schema. Asked again once, saying why.
    Unfit(String),
    /// No decision: an outcome of another kind, an error response, or no response at all (the
    /// connection dropped).
    Undecided,
}

impl Offer {
    /// The options a submitted plan offers: one allow option per target mode, named by the
    /// mode (the first target first), then "Keep planning".
    pub(crate) fn plan(graph: &ModeGraph, plan: &PendingPlan) -> Self {
        let mut options: Vec<(PermissionOption, Verdict)> = plan
            .targets()
            .iter()
            .map(|&target| {
                let mode = graph.mode(target);
                let option = PermissionOption::new(
                    format!("{SWITCH_PREFIX}{}", mode.id()),
                    format!("Yes, switch to {}", neutralize_line(mode.name())),
                    PermissionOptionKind::AllowOnce,
                );
                let verdict = Verdict::Approve {
                    to: Some(mode.id().to_owned()),
                    always: false,
                    steps: None,
                };
                (option, verdict)
            })
            .collect();
        options.push((
            PermissionOption::new(
                REJECT,
                "No, keep planning",
                PermissionOptionKind::RejectOnce,
            ),
            Verdict::Reject,
        ));
        Self {
            options,
            plan: Some(Box::new(plan.clone())),
        }
    }

    /// The options of a tool call that waits for approval: run it once, run it and always allow
    /// its tool until the mode changes (not for a call an `ask` rule made wait: an allowance
    /// does not cover it, and the library refuses one), or reject it.
    pub(crate) fn tool_call(call: &PendingToolCall) -> Self {
        let tool = neutralize_line(call.tool_name()).into_owned();
        let mut options = vec![
            (
                PermissionOption::new(ALLOW, "Allow", PermissionOptionKind::AllowOnce),
                Verdict::Approve {
                    to: None,
                    always: false,
                    steps: None,
                },
            ),
            (
                PermissionOption::new(
                    ALLOW_ALWAYS,
                    format!("Always allow {tool} in this mode"),
                    PermissionOptionKind::AllowAlways,
                ),
                Verdict::Approve {
                    to: None,
                    always: true,
                    steps: None,
                },
            ),
            (
                PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
                Verdict::Reject,
            ),
        ];
        if !call.payload().may_always_allow() {
            options
                .retain(|(_, verdict)| !matches!(verdict, Verdict::Approve { always: true, .. }));
        }
        Self {
            options,
            plan: None,
        }
    }

    /// The options as the request carries them.
    pub(crate) fn permission_options(&self) -> Vec<PermissionOption> {
        self.options.iter().map(|(o, _)| o.clone()).collect()
    }

    /// What the client's response decides: the verdict of the option it selected, when that
    /// option was offered; an option id never offered is [`Answer::Unfit`]; anything else
    /// decides nothing. A plan's allow option selected with `_meta.steps` (a list of the plan's
    /// step numbers, `{"steps": [1, 2, 3, 5]}`) approves only those steps, checked against
    /// the plan by the library ([`crate::session::PendingDecision::check`]): a list that does not name its steps,
    /// or steps with any other option, is [`Answer::Unfit`], saying why.
    pub(crate) fn answer(
        &self,
        response: Result<RequestPermissionResponse, agent_client_protocol::Error>,
    ) -> Answer {
        match response.map(|r| r.outcome) {
            Ok(RequestPermissionOutcome::Selected(selected)) => self
                .options
                .iter()
                .find(|(option, _)| option.option_id == selected.option_id)
                .map_or_else(
                    || {
                        Answer::Unfit(format!(
                            "`{}` is not one of the options offered",
                            neutralize_line(&selected.option_id.to_string())
                        ))
                    },
                    |(_, verdict)| self.with_steps(verdict, selected.meta.as_ref()),
                ),
            Ok(RequestPermissionOutcome::Cancelled) => Answer::Cancelled,
            Ok(_) | Err(_) => Answer::Undecided,
        }
    }
}

impl Offer {
    /// `verdict`, with the steps `meta` names (`steps`) when the client named some.
    fn with_steps(&self, verdict: &Verdict, meta: Option<&Meta>) -> Answer {
        let Some(named) = meta.and_then(|m| m.get("steps")) else {
            return Answer::Selected(verdict.clone());
        };
        let (Some(plan), Verdict::Approve { to: Some(to), .. }) = (&self.plan, verdict) else {
            return Answer::Unfit(
                "`_meta.steps` goes with an option that approves a plan".to_owned(),
            );
        };
        let Ok(steps) = serde_json::from_value::<Vec<u64>>(named.clone()) else {
            return Answer::Unfit(
                "`_meta.steps` must be a list of the plan's step numbers, as [1, 2, 5]".to_owned(),
            );
        };
        let decision = Decision::approve().to(to.clone()).steps(steps.clone());
        match crate::session::PendingDecision::Plan((**plan).clone()).check(&decision) {
            Ok(()) => Answer::Selected(Verdict::Approve {
                to: Some(to.clone()),
                always: false,
                steps: Some(steps),
            }),
            Err(why) => Answer::Unfit(neutralize_line(&why.to_string()).into_owned()),
        }
    }
}

impl Verdict {
    /// The library decision for this verdict, pinned to `sha256` (the plan's, the tool
    /// call's `argsSha256`, or the suspension's `payloadSha256`: what the request showed).
    pub(crate) fn decision(&self, sha256: &str, decided_by: &str) -> Decision {
        let decision = match self {
            Verdict::Approve {
                to: Some(mode),
                steps: Some(steps),
                ..
            } => Decision::approve()
                .to(mode.clone())
                .steps(steps.iter().copied()),
            Verdict::Approve { to: Some(mode), .. } => Decision::approve().to(mode.clone()),
            Verdict::Approve { always: true, .. } => Decision::approve().always_allow(),
            Verdict::Approve { .. } => Decision::approve(),
            Verdict::Reject => Decision::reject(),
            Verdict::Answer(answer) => Decision::answer(answer.clone()),
        };
        decision
            .with_sha256(sha256)
            .decided_by(decided_by)
            .via(crate::quorum::Via::Acp)
    }
}

/// The `toolCall` of a plan's permission request: kind `switch_mode`, the plan's title whole, the
/// plan as captured and as an approval hands it over, its title as a `# ` heading and its body
/// ([`crate::plan::revision_text`], hidden characters shown as escapes), and its sha256 in
/// `_meta`. Nothing is cut (issue 36, item 4: a title over 1,000 characters was cut in the
/// middle, the content held only the body, and the next mode got the whole title).
pub(crate) fn plan_tool_call(tool_call_id: String, plan: &PendingPlan) -> ToolCallUpdate {
    let payload = plan.payload();
    let submission = &payload.submission;
    let mut content = vec![ToolCallContent::Content(Content::new(as_code(
        &crate::plan::revision_text(submission),
    )))];
    // What the mode's reviewer said (it advises, or it escalated): beside the plan.
    if let Some(review) = &payload.review {
        content.push(ToolCallContent::Content(Content::new(as_code(
            &review.shown(),
        ))));
    }
    let fields = ToolCallUpdateFields::new()
        .kind(ToolKind::SwitchMode)
        .status(ToolCallStatus::Pending)
        .title(neutralize_line_within(&submission.title, usize::MAX).into_owned())
        .content(content)
        .raw_input(json!({ "path": submission.path }));
    ToolCallUpdate::new(tool_call_id, fields).meta(meta(json!({
        "decisionId": payload.decision_id,
        "sha256": submission.sha256,
        "path": submission.path,
        "revision": payload.revision,
        "targetModeIds": payload.target_mode_ids,
        // The plan's numbered steps as the payload lists them, `{"number": N, "text": ...}`
        // by the plan's own numbers: an allow option selected with `_meta.steps` approves only
        // those ([`Offer::answer`]).
        "steps": payload.steps,
    })))
}

/// The `toolCall` of a waiting tool call's permission request: its tool, every argument whole
/// ([`arguments_whole`] in the content, the arguments as JSON in `rawInput`), where its path
/// arguments lead when elsewhere than they read (a `where it acts:` line after the arguments,
/// and the file itself as the location: `notes.md`, a symlink to `src/main.rs`, is located at
/// `src/main.rs`), and its `argsSha256` in `_meta`. Nothing is cut: the user approves every
/// character.
pub(crate) fn waiting_tool_call(
    tool_call_id: String,
    call: &PendingToolCall,
    kind: ToolKind,
) -> ToolCallUpdate {
    let tool = neutralize_line(call.tool_name());
    let payload = call.payload();
    let mut shown = arguments_whole(call.args());
    for line in payload.where_paths_lead() {
        shown.push_str(&format!("\nwhere it acts: {line}"));
    }
    if let Some(review) = &payload.review {
        shown.push_str(&format!("\n{}", review.shown()));
    }
    let mut fields = ToolCallUpdateFields::new()
        .kind(kind)
        .status(ToolCallStatus::Pending)
        .title(format!(
            "{tool}{} (waits for approval)",
            made_by(payload.subagent.as_deref())
        ))
        .content(vec![ToolCallContent::Content(Content::new(as_code(
            &shown,
        )))])
        .raw_input(call.args().clone());
    let located = resolved_locations(payload);
    if !located.is_empty() {
        fields = fields.locations(located);
    }
    let mut fields_meta = json!({
        "decisionId": call.decision_id(),
        "argsSha256": call.args_sha256(),
        "toolName": call.tool_name(),
    });
    if let Some(subagent) = &payload.subagent {
        fields_meta["subagent"] = json!(subagent);
    }
    ToolCallUpdate::new(tool_call_id, fields).meta(meta(fields_meta))
}

/// What a request's title adds for a subagent's call that waits in its parent's session
/// (` in subagent explore`); nothing for the session's own.
pub(crate) fn made_by(subagent: Option<&crate::subagent::SubagentOrigin>) -> String {
    subagent.map_or(String::new(), |s| {
        format!(" in subagent {}", neutralize_line(&s.agent_type))
    })
}

/// The files a waiting call acts on, as resolved in the workspace it runs in
/// ([`ToolCallPayload::locations`]: those of its path arguments that lead elsewhere than they
/// read, `notes.md` located at `src/main.rs`); empty when each leads where it reads, or is in
/// doubt.
pub(crate) fn resolved_locations(payload: &ToolCallPayload) -> Vec<ToolCallLocation> {
    let Some(workspace) = &payload.terms.workspace else {
        return Vec::new();
    };
    payload
        .locations
        .iter()
        .filter_map(|l| l.path.as_deref())
        .map(|path| ToolCallLocation::new(workspace.join(path)))
        .collect()
}

/// `text` as a fenced code block, its hidden characters shown as escapes: an editor renders a
/// permission request's content as Markdown, which would hide an HTML comment, a link
/// definition or a `<details>` body of a plan the user approves. The fence is longer than any
/// run of backticks in `text`, so the text cannot close it.
///
/// Rule: the user sees every character of what they approve (the hostile review's finding: a
/// plan step inside `<!-- -->` was approved unseen).
pub(crate) fn as_code(text: &str) -> String {
    let text = neutralize(text);
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    format!("{fence}text\n{text}{newline}{fence}")
}

/// `_meta` with this crate's fields under `agentController`.
pub(crate) fn meta(fields: serde_json::Value) -> Meta {
    let mut meta = Meta::new();
    meta.insert("agentController".to_owned(), fields);
    meta
}
