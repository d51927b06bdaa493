//! The report at the end of a run of an approved plan (issue 40): when a run in the mode a
//! plan handed over to ends (completed, failed or aborted), after an approval of a plan that
//! declares its files (`## Files`) or numbers its steps, the session says what became of the
//! plan: the steps approved, done and not done, the files written inside the plan's files, the
//! writes outside them (approved, refused by the user, refused by `planScope = "enforce"`), the
//! declared files never written, and whether the plan file changed since it was approved.
//!
//! The rules live in the pure core (`src/machine/ledger.rs`): the writes of the mode are noted
//! as they are ruled and decided, and the report is computed as the run closes; the driver adds
//! the one fact that needs I/O, the plan file's current hash. The report is the `plan_report`
//! event ([`crate::Event::PlanReport`]), the session's [`crate::Session::plan_report`] and the
//! record's `planReport` (the last report of the session), which `agent-controller report`
//! prints.

use serde::{Deserialize, Serialize};

use crate::plan::PlanScope;
use crate::run_state::RunState;

/// What became of one write of the mode an approved plan binds, as the report counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanWriteKind {
    /// Inside the plan's files: it ran.
    Inside,
    /// Outside them: the user was asked (drift) and approved it.
    DriftApproved,
    /// Outside them: the user was asked (drift) and refused it (or it was cancelled unapproved).
    DriftRejected,
    /// Outside them: refused unasked by the planning mode's `planScope = "enforce"`.
    Enforced,
}

/// One write the ledger noted: the call, the paths it writes (as the workspace jail located
/// them; a path it could not locate is named by its argument), where they lie, and what became
/// of it (`None` while it waits for the user).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanWrite {
    /// The tool call's id.
    pub tool_call_id: String,
    /// The paths it writes.
    pub paths: Vec<String>,
    /// Whether every path lies inside the plan's files.
    pub inside: bool,
    /// What became of it; `None` while it waits for a decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<PlanWriteKind>,
}

/// What the session notes of the run of an approved plan, from the approval until the mode
/// changes or another plan is approved: the plan approved and the writes of its mode. Kept in
/// the session record (`planLedger`), so a restored session reports what was noted before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanLedger {
    /// The approval's decision id.
    pub decision_id: String,
    /// The mode the plan handed over to.
    pub mode_id: String,
    /// The plan file, relative to the workspace.
    pub path: String,
    /// The sha256 of the plan text approved (the user's edit, if any).
    pub sha256: String,
    /// The files the plan declares; `None` without a `## Files` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<PlanScope>,
    /// The steps approved, by the plan's numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<u64>,
    /// Whether the mode keeps a task list seeded by the plan's steps (it offers the task tools).
    #[serde(default)]
    pub tasks: bool,
    /// The writes noted, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<PlanWrite>,
}

/// The report of a run of an approved plan ([`crate::Event::PlanReport`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanReport {
    /// The run that ended.
    pub run_id: String,
    /// How it ended: completed, failed or aborted.
    pub reason: RunState,
    /// The mode it ran in (the one the plan handed over to).
    pub mode_id: String,
    /// The approval's decision id.
    pub decision_id: String,
    /// The plan file, relative to the workspace.
    pub path: String,
    /// The sha256 of the plan text approved.
    pub approved_sha256: String,
    /// The sha256 of the plan file as the run ended; `None` when it could not be read
    /// (removed, or no longer a plan file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_sha256: Option<String>,
    /// Whether the plan file differs from the text approved (`true` when it could not be
    /// read): what the mode was given is the approved text, never the file as it is now.
    pub plan_changed: bool,
    /// The steps approved, by the plan's numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps_approved: Vec<u64>,
    /// The task list's completed steps (task ids), when the mode keeps a task list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_done: Option<Vec<String>>,
    /// The task list's steps not completed (task ids), when the mode keeps a task list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_not_done: Option<Vec<String>>,
    /// Whether the plan declares its files (a `## Files` section).
    pub scoped: bool,
    /// The files written inside the plan's files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written_inside: Vec<String>,
    /// The writes outside them the user approved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift_approved: Vec<String>,
    /// The writes outside them the user refused (or that were cancelled unapproved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift_rejected: Vec<String>,
    /// The writes outside them refused unasked (`planScope = "enforce"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enforced: Vec<String>,
    /// The declared files (entries of `## Files`) no write touched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untouched: Vec<String>,
}

impl PlanReport {
    /// The report as one text for a person: [`PlanReport::lines`], one a line. What the
    /// terminal prints at the end of the run and what ACP sends the client as an agent message.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::RunState;
    /// use agent_controller::plan_report::PlanReport;
    /// let report = PlanReport {
    ///     run_id: "run_2".into(), reason: RunState::Completed, mode_id: "build".into(),
    ///     decision_id: "decision_1".into(), path: ".agent/plans/p.md".into(),
    ///     approved_sha256: "ab".into(), current_sha256: Some("ab".into()), plan_changed: false,
    ///     steps_approved: vec![1, 2], steps_done: None, steps_not_done: None, scoped: true,
    ///     written_inside: vec!["src/a.rs".into()], drift_approved: vec![], drift_rejected: vec![],
    ///     enforced: vec![], untouched: vec![],
    /// };
    /// assert_eq!(report.shown(), report.lines().join("\n"));
    /// assert!(report.shown().starts_with("plan report: "));
    /// ```
    pub fn shown(&self) -> String {
        self.lines().join("\n")
    }

    /// The report as lines for a person (the terminal, `agent-controller report`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::RunState;
    /// use agent_controller::plan_report::PlanReport;
    /// let report = PlanReport {
    ///     run_id: "run_2".into(), reason: RunState::Completed, mode_id: "build".into(),
    ///     decision_id: "decision_1".into(), path: ".agent/plans/p.md".into(),
    ///     approved_sha256: "ab".into(), current_sha256: Some("ab".into()), plan_changed: false,
    ///     steps_approved: vec![1, 2], steps_done: None, steps_not_done: None, scoped: true,
    ///     written_inside: vec!["src/a.rs".into()], drift_approved: vec![], drift_rejected: vec![],
    ///     enforced: vec![], untouched: vec!["src/b.rs".into()],
    /// };
    /// let lines = report.lines();
    /// assert!(lines[0].contains("decision_1"));
    /// assert!(lines.iter().any(|l| l == "  never touched: src/b.rs"));
    /// ```
    pub fn lines(&self) -> Vec<String> {
        let list = |items: &[String]| {
            if items.is_empty() {
                "none".to_owned()
            } else {
                crate::display::neutralize_line(&items.join(", ")).into_owned()
            }
        };
        let numbers = |n: &[u64]| n.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        let mut lines = vec![format!(
            "plan report: {} ({}), run {} {} in {}",
            crate::display::neutralize_line(&self.path),
            self.decision_id,
            self.run_id,
            self.reason,
            crate::display::neutralize_line(&self.mode_id)
        )];
        let approved = if self.steps_approved.is_empty() {
            "none numbered".to_owned()
        } else {
            numbers(&self.steps_approved)
        };
        lines.push(format!("  steps approved: {approved}"));
        if let (Some(done), Some(not_done)) = (&self.steps_done, &self.steps_not_done) {
            lines.push(format!("  steps done: {}", list(done)));
            lines.push(format!("  steps not done: {}", list(not_done)));
        }
        if self.scoped {
            lines.push(format!("  written inside: {}", list(&self.written_inside)));
            lines.push(format!(
                "  outside, approved: {}",
                list(&self.drift_approved)
            ));
            lines.push(format!(
                "  outside, refused by the user: {}",
                list(&self.drift_rejected)
            ));
            lines.push(format!(
                "  outside, refused by enforce: {}",
                list(&self.enforced)
            ));
            lines.push(format!("  never touched: {}", list(&self.untouched)));
        } else {
            lines.push("  files: the plan declares none (no `## Files` section)".to_owned());
        }
        lines.push(if self.plan_changed {
            "  plan file: CHANGED since approval (the mode ran the approved text)".to_owned()
        } else {
            "  plan file: unchanged since approval".to_owned()
        });
        lines
    }
}
