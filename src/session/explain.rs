//! What the session would do with a tool call, without running it ([`Session::explain`]): the
//! session's own ruling ([`Session::ruling_explained`]), its steps kept.

use serde_json::Value;

use super::Session;
use crate::allowance::AllowanceScope;
use crate::exchange::ToolCall;
use crate::explain::{Check, ExplainError, Explanation, Outcome, Step};
use crate::machine::ruling::Ruling;

impl Session {
    /// What this session would do, now, with a call of `tool` with `args` in its current mode,
    /// and each step of why ([`crate::explain`]): the ruling a call of the model gets, by the
    /// same code, in the same workspace (paths resolved as the tool takes them, symlinks
    /// followed), with this session's allowances and approved plan's files. Nothing runs,
    /// nothing is saved, no event is sent.
    ///
    /// # Errors
    /// [`ExplainError::UnknownTool`] when the controller has no tool `tool` and the mode does
    /// not offer one; [`ExplainError::Arguments`] when the arguments are not well formed or do
    /// not fit the tool's input schema (the call would be refused before any rule applies).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, SessionOptions, ToolRegistry};
    /// # use agent_controller::explain::{Check, Outcome};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    ///     "modes.toml",
    /// )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .build()?;
    /// let session = controller.start_session(SessionOptions::new()).await?;
    /// let args = serde_json::json!({"path": "a.txt", "content": "hi"});
    /// let explained = session.explain("write_file", args)?;
    /// assert_eq!(explained.outcome, Outcome::Ask);
    /// assert_eq!(explained.decided_by, Check::RequireApproval);
    /// # Ok(())
    /// # }
    /// ```
    pub fn explain(&self, tool: &str, args: Value) -> Result<Explanation, ExplainError> {
        let mode_id = self.shared.graph.mode(self.state.mode).id().to_owned();
        if self.shared.tools.get(tool).is_none()
            && !self.shared.runtime(self.state.mode).allows(tool)
        {
            let hint = crate::hint::did_you_mean(tool, self.shared.tools.names())
                .map(|near| format!(": did you mean `{near}`?"))
                .unwrap_or_default();
            return Err(ExplainError::UnknownTool {
                tool: tool.to_owned(),
                hint,
            });
        }
        let call = ToolCall::new("explain", tool, args);
        let mut steps = Vec::new();
        let ruling = self.ruling_explained(&call, &mut steps);
        let origin = self.shared.graph.origin();
        for step in &mut steps {
            if let Some(at) = &step.at {
                step.at = Some(format!("{origin}:{at}"));
            }
        }
        let outcome = match &ruling {
            None => Outcome::Unavailable,
            Some(Ruling::Refused(reason))
                if steps.last().is_some_and(|s| s.check == Check::Arguments) =>
            {
                return Err(ExplainError::Arguments {
                    tool: tool.to_owned(),
                    reason: reason.clone(),
                });
            }
            Some(Ruling::Run(_) | Ruling::Allowed(_) | Ruling::HookAllowed(_)) => Outcome::Allow,
            Some(Ruling::Ask(_) | Ruling::Drift(_)) => Outcome::Ask,
            Some(Ruling::Deny(_) | Ruling::Refused(_) | Ruling::HookDenied(_)) => Outcome::Deny,
        };
        let deciding = deciding_step(ruling.as_ref(), &steps)
            .cloned()
            .unwrap_or_else(|| Step::new(Check::Default, "nothing decided"));
        let reason = deciding
            .finding
            .strip_prefix("decides: ")
            .unwrap_or(&deciding.finding)
            .to_owned();
        Ok(Explanation {
            mode_id,
            tool: tool.to_owned(),
            outcome,
            decided_by: deciding.check,
            at: deciding.at,
            reason,
            steps,
        })
    }
}

/// The step that decided `ruling`: an approved plan's files when they changed it, else the last
/// step before them (the deciding rule, `requireApproval` or the default, an allowance, what
/// the tool does).
fn deciding_step<'a>(ruling: Option<&Ruling>, steps: &'a [Step]) -> Option<&'a Step> {
    let by_plan = match ruling {
        Some(Ruling::Drift(_) | Ruling::Refused(_)) => true,
        Some(Ruling::Allowed(by)) => by.scope == AllowanceScope::Plan,
        _ => false,
    };
    if by_plan {
        return steps.iter().rev().find(|s| s.check == Check::PlanScope);
    }
    steps.iter().rev().find(|s| s.check != Check::PlanScope)
}
