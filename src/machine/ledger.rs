//! The ledger of an approved plan's run and its report at the end ([`crate::plan_report`]),
//! without I/O: an approval of a plan that declares its files or numbers its steps starts a
//! ledger for the mode it hands over to ([`State::start_plan_ledger`]); each write of that mode
//! the driver rules is noted ([`Change::note_plan_write`]) and each decision on one of them
//! settles it ([`State::settle_plan_write`]); as a run of that mode ends, the report is
//! computed ([`PlanLedger::report`]) and kept as the session's last. A change of mode ends the
//! ledger; another approved plan starts a new one.

use std::sync::Arc;

use super::change::Change;
use super::scope::Written;
use super::state::State;
use crate::event::{Event, RunState};
use crate::exchange::tasks::{Task, TaskStatus};
use crate::plan::PlanScopePolicy;
use crate::plan_report::{PlanLedger, PlanReport, PlanWrite, PlanWriteKind};
use crate::rules::ResolvedPath;

/// How the driver's ruling on a write of the bound mode ended, as the ledger notes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteRuled {
    /// It runs (a rule or an allowance let it).
    Runs,
    /// It waits for the user (drift, or an `ask` rule).
    Waits,
    /// It is refused unasked.
    Refused,
}

/// The paths of `written` as the report names them: a located path as it is, one in doubt
/// by its argument; a call that locates none by its tool.
fn paths_of(written: &Written, tool_name: &str) -> Vec<String> {
    if written.is_empty() {
        return vec![format!("({tool_name}: no path located)")];
    }
    written
        .iter()
        .map(|(arg, at)| match at {
            ResolvedPath::Inside(path) => path.clone(),
            ResolvedPath::Doubtful(_) | ResolvedPath::NotAString(_) => {
                format!("({tool_name} `{arg}`: not located)")
            }
        })
        .collect()
}

impl State {
    /// Starts the ledger of the plan approved by `decision_id` for mode `mode_id`, in place of
    /// any earlier one; none when the plan declares no files and numbers no steps.
    pub(crate) fn start_plan_ledger(&mut self, ledger: PlanLedger) {
        self.plan_ledger = (ledger.files.is_some() || !ledger.steps.is_empty()).then_some(ledger);
    }

    /// The ledger a child started by a `subagent` call of the current mode notes its writes
    /// in: a copy of this one without its writes (a child's writes are bound as the
    /// parent's, and ruled by the same rule, [`Change::note_plan_write`]); its parent takes
    /// them back as the child ends ([`Change::note_child_plan_writes`]). `None` without one.
    pub(crate) fn child_plan_ledger(&self) -> Option<PlanLedger> {
        self.plan_ledger.as_ref().map(|ledger| PlanLedger {
            writes: Vec::new(),
            ..ledger.clone()
        })
    }

    /// Settles the write `tool_call_id` noted while it waited: `approved` or not.
    pub(crate) fn settle_plan_write(&mut self, tool_call_id: &str, approved: bool) {
        let Some(ledger) = &mut self.plan_ledger else {
            return;
        };
        for write in ledger
            .writes
            .iter_mut()
            .filter(|w| w.tool_call_id == tool_call_id && w.kind.is_none())
        {
            write.kind = match (write.inside, approved) {
                (true, true) => Some(PlanWriteKind::Inside),
                (false, true) => Some(PlanWriteKind::DriftApproved),
                (false, false) => Some(PlanWriteKind::DriftRejected),
                // Inside, refused by the user (an `ask` rule held it): nothing was written.
                (true, false) => None,
            };
        }
        ledger
            .writes
            .retain(|w| !(w.tool_call_id == tool_call_id && w.inside && w.kind.is_none()));
    }
}

impl Change<'_> {
    /// Notes the write `tool_call_id` of tool `tool_name` at `written`, ruled `ruled`, in the
    /// ledger of the current mode's approved plan (nothing without one, or for another mode).
    pub(crate) fn note_plan_write(
        &mut self,
        tool_call_id: String,
        tool_name: &str,
        written: &Written,
        ruled: WriteRuled,
    ) {
        let mode_id = self.config.graph.mode(self.state.mode).id().to_owned();
        let policy = self
            .state
            .plan_grant_in(&mode_id)
            .and_then(|g| g.plan.as_ref())
            .map(|p| p.plan_scope);
        let Some(ledger) = self
            .state
            .plan_ledger
            .as_mut()
            .filter(|l| l.mode_id == mode_id)
        else {
            return;
        };
        let Some(files) = &ledger.files else {
            return;
        };
        let inside = !written.is_empty()
            && written
                .iter()
                .all(|(_, at)| matches!(at, ResolvedPath::Inside(p) if files.contains(p)));
        let kind = match (ruled, inside) {
            (WriteRuled::Runs, true) => Some(PlanWriteKind::Inside),
            // Outside and run unasked: only under `off`, where the plan binds nothing (its
            // files are only shown); no one was asked and nothing refused it, so it is none
            // of the report's writes outside.
            (WriteRuled::Runs, false) => return,
            (WriteRuled::Waits, _) => None,
            (WriteRuled::Refused, false) if policy == Some(PlanScopePolicy::Enforce) => {
                Some(PlanWriteKind::Enforced)
            }
            (WriteRuled::Refused, _) => return,
        };
        ledger.writes.push(PlanWrite {
            tool_call_id,
            paths: paths_of(written, tool_name),
            inside,
            kind,
        });
    }

    /// Takes into the current mode's ledger the writes `writes` that the child `child_id`
    /// noted in its copy ([`State::child_plan_ledger`]) as it ended: each as the child ruled
    /// and settled it, under the child's id (`CHILD/CALL`, apart from the parent's own calls).
    /// Nothing without a ledger of the current mode.
    pub(crate) fn note_child_plan_writes(&mut self, child_id: &str, writes: Vec<PlanWrite>) {
        let mode_id = self.config.graph.mode(self.state.mode).id();
        let Some(ledger) = self
            .state
            .plan_ledger
            .as_mut()
            .filter(|l| l.mode_id == mode_id)
        else {
            return;
        };
        ledger
            .writes
            .extend(writes.into_iter().map(|write| PlanWrite {
                tool_call_id: format!("{child_id}/{}", write.tool_call_id),
                ..write
            }));
    }

    /// As run `run_id` ends with `reason` in the mode of the approved plan's ledger: the
    /// report, kept as the session's last and emitted as `plan_report`. Its plan-file hash is
    /// the driver's to fill in (`current_sha256`, I/O): until then the file counts as changed.
    pub(crate) fn report_plan(&mut self, run_id: &Arc<str>, reason: RunState) {
        if !matches!(
            reason,
            RunState::Completed | RunState::Failed | RunState::Aborted
        ) || self.config.child
        {
            return;
        }
        let mode_id = self.config.graph.mode(self.state.mode).id();
        let Some(ledger) = self
            .state
            .plan_ledger
            .as_ref()
            .filter(|l| l.mode_id == mode_id)
        else {
            return;
        };
        let report = ledger.report(run_id, reason, &self.state.tasks);
        self.state.plan_report = Some(report.clone());
        self.emit(Event::PlanReport {
            session_id: self.id.clone(),
            report: Box::new(report),
        });
    }
}

impl PlanLedger {
    /// The report of run `run_id`, ended with `reason`, with the session's task list `tasks`;
    /// the plan file counts as changed until the driver read it (`current_sha256`).
    pub(crate) fn report(&self, run_id: &str, reason: RunState, tasks: &[Task]) -> PlanReport {
        let of = |kind: PlanWriteKind| -> Vec<String> {
            let mut paths: Vec<String> = Vec::new();
            for write in self.writes.iter().filter(|w| w.kind == Some(kind)) {
                for path in &write.paths {
                    if !paths.contains(path) {
                        paths.push(path.clone());
                    }
                }
            }
            paths
        };
        let written_inside = of(PlanWriteKind::Inside);
        let mut drift_rejected = of(PlanWriteKind::DriftRejected);
        // A write still waiting as the run ends was never approved.
        for write in self.writes.iter().filter(|w| w.kind.is_none() && !w.inside) {
            for path in &write.paths {
                if !drift_rejected.contains(path) {
                    drift_rejected.push(path.clone());
                }
            }
        }
        let untouched = self.files.as_ref().map_or_else(Vec::new, |files| {
            files
                .entries()
                .iter()
                .filter(|entry| {
                    let one = crate::plan::PlanScope::single(entry);
                    !written_inside.iter().any(|p| one.contains(p))
                })
                .cloned()
                .collect()
        });
        let (steps_done, steps_not_done) = if self.tasks {
            let done = |t: &&Task| t.status == TaskStatus::Completed;
            (
                Some(tasks.iter().filter(done).map(|t| t.id.clone()).collect()),
                Some(
                    tasks
                        .iter()
                        .filter(|t| !done(t))
                        .map(|t| t.id.clone())
                        .collect(),
                ),
            )
        } else {
            (None, None)
        };
        PlanReport {
            run_id: run_id.to_owned(),
            reason,
            mode_id: self.mode_id.clone(),
            decision_id: self.decision_id.clone(),
            path: self.path.clone(),
            approved_sha256: self.sha256.clone(),
            current_sha256: None,
            plan_changed: true,
            steps_approved: self.steps.clone(),
            steps_done,
            steps_not_done,
            scoped: self.files.is_some(),
            written_inside,
            drift_approved: of(PlanWriteKind::DriftApproved),
            drift_rejected,
            enforced: of(PlanWriteKind::Enforced),
            untouched,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanScope;

    fn ledger() -> PlanLedger {
        PlanLedger {
            decision_id: "decision_1".into(),
            mode_id: "build".into(),
            path: ".agent/plans/p.md".into(),
            sha256: "ab".into(),
            files: PlanScope::of("## Files\n- `src/theme.rs`\n- `src/ui/**`\n- `README.md`\n")
                .expect("ok"),
            steps: vec![1, 2],
            tasks: true,
            writes: Vec::new(),
        }
    }

    fn write(id: &str, path: &str, inside: bool, kind: Option<PlanWriteKind>) -> PlanWrite {
        PlanWrite {
            tool_call_id: id.into(),
            paths: vec![path.into()],
            inside,
            kind,
        }
    }

    #[test]
    fn the_report_counts_each_write_by_what_became_of_it() {
        let mut state = State::new(crate::mode::ModeId::from_index(0));
        state.start_plan_ledger(ledger());
        let l = state.plan_ledger.as_mut().expect("started");
        l.writes
            .push(write("a", "src/ui/b.rs", true, Some(PlanWriteKind::Inside)));
        l.writes.push(write("b", "src/main.rs", false, None));
        l.writes.push(write("c", "src/lib.rs", false, None));
        l.writes.push(write(
            "d",
            "Cargo.toml",
            false,
            Some(PlanWriteKind::Enforced),
        ));
        l.writes.push(write("e", "README.md", true, None));
        l.writes.push(write("f", "src/x.rs", false, None));
        state.settle_plan_write("b", true);
        state.settle_plan_write("c", false);
        state.settle_plan_write("e", false);
        let tasks = vec![
            Task::new("1", "one", TaskStatus::Completed),
            Task::new("2", "two", TaskStatus::InProgress),
        ];
        let report = state.plan_ledger.as_ref().expect("ledger").report(
            "run_2",
            RunState::Completed,
            &tasks,
        );
        assert_eq!(report.written_inside, ["src/ui/b.rs"]);
        assert_eq!(report.drift_approved, ["src/main.rs"]);
        // Refused, and still waiting as the run ended: not approved.
        assert_eq!(report.drift_rejected, ["src/lib.rs", "src/x.rs"]);
        assert_eq!(report.enforced, ["Cargo.toml"]);
        // README.md was asked about and refused: never written.
        assert_eq!(report.untouched, ["src/theme.rs", "README.md"]);
        assert_eq!(report.steps_approved, [1, 2]);
        assert_eq!(report.steps_done.as_deref(), Some(&["1".to_owned()][..]));
        assert_eq!(
            report.steps_not_done.as_deref(),
            Some(&["2".to_owned()][..])
        );
        assert!(report.plan_changed, "unread: counts as changed");
    }

    #[test]
    fn a_plan_without_files_or_steps_starts_no_ledger() {
        let mut state = State::new(crate::mode::ModeId::from_index(0));
        let mut l = ledger();
        l.files = None;
        l.steps.clear();
        state.start_plan_ledger(l);
        assert!(state.plan_ledger.is_none());
    }
}
