//! A pending decision as a person must read it ([`ShownPending`]): every text of a
//! [`PendingSummary`] that came from a model, a file or a config, through
//! [`crate::display::neutralize`] (several lines) or [`crate::display::neutralize_line_within`]
//! (one line, never cut), so a host that draws it in a web page or a chat (`serve`'s page, a
//! relay) shows every character as the terminal does, hidden and control characters as their
//! escapes, with no rule of its own. Nothing is cut: the page shows the whole plan and the whole
//! arguments a decision approves.

use serde::Serialize;

use super::{PendingKind, PendingSummary, UnreadableRecord};
use crate::display::{arguments_whole, neutralize, neutralize_line_within};

/// A pending decision's texts as shown to the person who decides ([`PendingSummary::shown`]):
/// each the summary's field with every character that could hide or fake text replaced by its
/// visible escape (`\u{202e}`), nothing cut. Serialized camelCase; a field that does not apply
/// to the decision's kind is left out (or empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ShownPending {
    /// The plan's title, on one line.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// The plan's lines as the approver reads them and a comment numbers them (from 1): the
    /// `# title` line, a blank line, the body ([`crate::tool::submit_plan::revision_text`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
    /// What changed since the previous revision (a unified diff); absent for a first revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The plan's numbered steps, each on one line as the plan writes it (`3. Add the tests.`:
    /// its number first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// The files the plan declares it writes (its `## Files` section), each on one line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// The comments the rejection of the previous revision made: `line N "quote": text`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<String>,
    /// The mode it waits in, on one line.
    pub mode_id: String,
    /// The modes an approval may hand over to (the plain approval's first), each on one line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub target_mode_ids: Vec<String>,
    /// The tool called (a tool call, a question or a suspension), on one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// A tool call's arguments, whole, one top-level argument per line
    /// ([`crate::display::arguments_whole`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
    /// Where a tool call's path arguments lead when elsewhere than they read:
    /// `path notes.md -> src/main.rs`, each on one line
    /// ([`crate::rules::ResolvedLocation::shown`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
    /// Why a tool call waits as drift, on one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// What a reviewer said about the plan or the call, on one line
    /// ([`crate::review::ReviewRecord::shown`]: `reviewer ID: VERDICT: REASON`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<String>,
    /// A question's text (`ask_user`): several lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// A question's options, in order, each its label (one line) and its description.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<ShownOption>,
    /// What another tool's suspension shows the user (its payload), whole, as
    /// [`crate::display::arguments_whole`] lays out JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The JSON Schema a question's or a suspension's answer must fit (`answerSchema`), whole,
    /// as [`crate::display::arguments_whole`] lays out JSON: a tool (an MCP server, say) writes
    /// it, and its descriptions are read by the person answering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_schema: Option<String>,
    /// The workspace the decision acts in, on one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The SHA-256 an approval pins, on one line.
    pub sha256: String,
    /// How many approvals by distinct people it needs (a quorum, `approvers` above 1); `None`
    /// when one is enough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvers_needed: Option<u8>,
    /// The approvals given so far toward the quorum, oldest first, each on one line:
    /// `alice (decide, 2026-12-07T02:00:00Z)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<String>,
}

/// One option of a question, as shown ([`ShownPending::options`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ShownOption {
    /// The label, on one line.
    pub label: String,
    /// The description, on one line; empty when it has none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// One line, never cut.
fn line(text: &str) -> String {
    neutralize_line_within(text, usize::MAX).into_owned()
}

impl PendingSummary {
    /// This decision's texts as the person deciding must read them ([`ShownPending`]): every
    /// character that could hide or fake text shown as its escape, nothing cut. A host that
    /// draws a pending decision (a web page, a chat message) shows these texts and sends back
    /// the raw ones (`sha256`, an option's `label`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::PendingSummary;
    /// let summary: PendingSummary = serde_json::from_value(serde_json::json!({
    ///     "sessionId": "s1", "runId": "run_1", "toolCallId": "call_1", "kind": "plan",
    ///     "decisionId": "decision_1", "modeId": "plan", "targetModeId": "build",
    ///     "title": "Dark <b>mode</b>\u{202e}", "plan": "1. Edit\u{200b} css\n\u{1b}[2K2. Test",
    ///     "updatedAt": 0
    /// }))?;
    /// let shown = summary.shown();
    /// assert_eq!(shown.title, "Dark <b>mode</b>\\u{202e}");
    /// assert_eq!(shown.lines, ["# Dark <b>mode</b>\\u{202e}", "", "1. Edit\\u{200b} css", "\\u{1b}[2K2. Test"]);
    /// assert_eq!(shown.target_mode_ids, ["build"]);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn shown(&self) -> ShownPending {
        let plan = self.plan.as_ref().map(|plan| crate::plan::PlanSubmission {
            path: self.plan_path.clone(),
            title: self.title.clone(),
            plan: plan.clone(),
            sha256: self.sha256.clone(),
        });
        let lines = plan
            .as_ref()
            .map(|submission| {
                crate::plan::revision_text(submission)
                    .lines()
                    .map(line)
                    .collect()
            })
            .unwrap_or_default();
        let targets = match self.target_mode_ids.as_slice() {
            [] if !self.target_mode_id.is_empty() => vec![line(&self.target_mode_id)],
            ids => ids.iter().map(|id| line(id)).collect(),
        };
        let question = self
            .payload
            .as_ref()
            .filter(|_| self.kind == PendingKind::Question);
        let options = question
            .and_then(|q| q.get("options"))
            .and_then(serde_json::Value::as_array)
            .map(|options| {
                options
                    .iter()
                    .map(|o| ShownOption {
                        label: line(&text_of(o.get("label").unwrap_or(o))),
                        description: o
                            .get("description")
                            .map(|d| line(&text_of(d)))
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        ShownPending {
            title: line(&self.title),
            lines,
            diff: self.diff.as_deref().map(|d| neutralize(d).into_owned()),
            steps: self.steps.iter().map(|s| line(&s.to_string())).collect(),
            scope: self
                .scope
                .iter()
                .flat_map(|scope| scope.entries())
                .map(|entry| line(entry))
                .collect(),
            comments: self
                .comments
                .iter()
                .map(|c| {
                    line(&format!(
                        "line {} \"{}\": {}",
                        c.line,
                        crate::display::decode_escapes(&c.quote),
                        c.text
                    ))
                })
                .collect(),
            mode_id: line(&self.mode_id),
            target_mode_ids: targets,
            tool_name: self.tool_name.as_deref().map(line),
            args: self
                .args
                .as_ref()
                .filter(|_| self.kind == PendingKind::ToolCall)
                .map(arguments_whole),
            locations: self
                .locations
                .iter()
                .filter(|l| l.differs())
                .map(crate::rules::ResolvedLocation::shown)
                .collect(),
            drift: self.drift.as_deref().map(line),
            review: self
                .review
                .as_deref()
                .map(crate::review::ReviewRecord::shown),
            question: question
                .and_then(|q| q.get("question"))
                .map(|q| neutralize(&text_of(q)).into_owned()),
            options,
            payload: self
                .payload
                .as_ref()
                .filter(|_| self.kind == PendingKind::Suspension)
                .map(arguments_whole),
            answer_schema: self.answer_schema.as_ref().map(arguments_whole),
            workspace: self
                .terms
                .workspace
                .as_ref()
                .map(|w| line(&w.display().to_string())),
            sha256: line(&self.sha256),
            approvers_needed: self.terms.approvers_needed,
            approvals: self
                .terms
                .approvals
                .iter()
                .map(|a| {
                    let via = a.via.map_or_else(String::new, |v| format!("{v}, "));
                    line(&format!("{} ({via}{})", a.by, a.at))
                })
                .collect(),
        }
    }
}

/// A JSON string's text, or any other value as JSON.
fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl UnreadableRecord {
    /// The same report as a person must read it, as [`PendingSummary::shown`] gives a pending
    /// decision's texts: its session id, location and reason each on one line, every character
    /// that could hide or fake text as its escape ([`neutralize_line_within`]),
    /// nothing cut. A location is a path, and a path may hold any character.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::{StoreError, UnreadableRecord};
    /// let error = StoreError::backend_message("not JSON");
    /// let report = UnreadableRecord::new("s1", "/var/sessions\u{202e}/s1.json", &error);
    /// let shown = report.shown();
    /// assert_eq!(shown.location, "/var/sessions\\u{202e}/s1.json");
    /// assert_eq!(shown.session_id, "s1");
    /// ```
    pub fn shown(&self) -> Self {
        Self {
            session_id: line(&self.session_id),
            location: line(&self.location),
            reason: line(&self.reason),
        }
    }
}
