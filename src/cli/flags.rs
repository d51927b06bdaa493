//! What the decision flags (`--approve`, `--reject`, `--sha256`, ...) decide.

use agent_controller::display::neutralize_line;
use agent_controller::tool::submit_plan;
use agent_controller::{Decision, PendingToolCall, SuspendPayload};

use crate::cli::args::DecisionArgs;
use crate::cli::exit::Failure;

impl DecisionArgs {
    /// The decision the flags give, or `None` when the prompt asks.
    pub(crate) fn fixed(&self) -> Option<Decision> {
        let mut decision = if self.approve {
            Decision::approve()
        } else if self.reject {
            Decision::reject()
        } else {
            return None;
        };
        decision.feedback = self
            .feedback
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_owned);
        if let Some(sha256) = &self.sha256 {
            decision = decision.with_sha256(sha256);
        }
        if let Some(to) = &self.to {
            decision = decision.to(to);
        }
        if let Some(text) = &self.edited {
            decision = decision.with_plan(text);
        }
        Some(self.signed(decision))
    }

    /// Reads and checks --plan-file (a regular file, at most 1 MiB, UTF-8, not blank) into the
    /// edited plan, before anything is decided.
    pub(crate) fn read_plan_file(&mut self) -> Result<(), Failure> {
        let Some(path) = &self.plan_file else {
            return Ok(());
        };
        let text = submit_plan::read_plan_file(path)
            .map_err(|e| Failure::invalid(neutralize_line(&format!("--plan-file: {e}"))))?;
        self.edited = Some(text);
        Ok(())
    }

    /// The decision the flags give for a tool call that waits for approval, or `None` when the
    /// prompt asks: the verdict, the feedback and `--always`; the plan's `--to` and
    /// `--plan-file` are not part of it. A `--sha256` naming other arguments is refused (exit 5)
    /// before anything is decided.
    pub(crate) fn fixed_for_tool_call(
        &self,
        call: &PendingToolCall,
    ) -> Result<Option<Decision>, Failure> {
        if let Some(pinned) = self.sha256.as_ref().filter(|p| *p != call.args_sha256()) {
            return Err(Failure::refused(format!(
                "the tool call {} ({}) has argsSha256 {}, not {pinned}: it is not the call you meant; nothing was decided",
                neutralize_line(call.decision_id()),
                neutralize_line(call.tool_name()),
                neutralize_line(call.args_sha256())
            )));
        }
        let mut decision = if self.approve {
            Decision::approve()
        } else if self.reject {
            Decision::reject()
        } else {
            return Ok(None);
        };
        decision.feedback = self
            .feedback
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_owned);
        if self.always {
            decision = decision.always_allow();
        }
        Ok(Some(self.signed(decision.with_sha256(call.args_sha256()))))
    }

    /// Refuses (exit 2) the flags that go with a plan (`--to`, `--plan-file`) when `decide`
    /// names a tool call, before anything is decided.
    pub(crate) fn check_for_tool_call(&self, call: &PendingToolCall) -> Result<(), Failure> {
        let flag = if self.to.is_some() {
            "--to"
        } else if self.plan_file.is_some() {
            "--plan-file"
        } else {
            return Ok(());
        };
        Err(Failure::invalid(format!(
            "{flag} goes with a plan, and decision {} is a tool call ({}): nothing was decided",
            neutralize_line(call.decision_id()),
            neutralize_line(call.tool_name())
        )))
    }

    /// `decision` with who decided: `--by`, else the OS user, else `unknown`.
    pub(crate) fn signed(&self, decision: Decision) -> Decision {
        let by = self.by.clone().unwrap_or_else(|| {
            ["USER", "LOGNAME"]
                .iter()
                .filter_map(|key| std::env::var(key).ok())
                .find(|name| !name.trim().is_empty())
                .unwrap_or_else(|| "unknown".to_owned())
        });
        decision.decided_by(by)
    }

    /// Refuses a plan other than the one `--sha256` names, before it is shown or decided.
    pub(crate) fn check_pinned(&self, payload: &SuspendPayload) -> Result<(), Failure> {
        match &self.sha256 {
            Some(pinned) if *pinned != payload.submission.sha256 => Err(Failure::refused(format!(
                "the pending plan has sha256 {}, not {pinned}: it is not the plan you meant; nothing was decided",
                payload.submission.sha256
            ))),
            _ => Ok(()),
        }
    }
}
