//! What the decision flags (`--approve`, `--reject`, `--sha256`, ...) decide.

use agent_controller::display::neutralize_line;
use agent_controller::tool::submit_plan;
use agent_controller::{Decision, PendingDecision};

use crate::cli::args::DecisionArgs;
use crate::cli::exit::Failure;

impl DecisionArgs {
    /// Whether a verdict flag (--approve, --reject) decides, so the prompt never asks.
    pub(crate) fn decides(&self) -> bool {
        self.approve || self.reject || self.answers()
    }

    /// Whether an answer flag (`--answer`, `--answer-json`) is given.
    pub(crate) fn answers(&self) -> bool {
        !self.answer.is_empty() || self.answer_json.is_some()
    }

    /// The answer the flags give for `suspended`: the JSON of `--answer-json`, or the text of
    /// `--answer` (an array of them when the answer it takes is an array).
    fn answer_for(
        &self,
        suspended: &agent_controller::session::PendingSuspension,
    ) -> Result<serde_json::Value, Failure> {
        if let Some(json) = &self.answer_json {
            return serde_json::from_str(json).map_err(|e| {
                Failure::invalid(neutralize_line(&format!(
                    "--answer-json is not JSON: {e}; nothing was answered"
                )))
            });
        }
        let takes_array = suspended.payload().answer_schema["type"] == "array";
        Ok(match (takes_array, self.answer.as_slice()) {
            (true, texts) => serde_json::json!(texts),
            (false, [text]) => serde_json::json!(text),
            (false, _) => {
                return Err(Failure::invalid(format!(
                    "decision {} takes one answer, and --answer was given {} times: nothing was answered",
                    neutralize_line(suspended.decision_id()),
                    self.answer.len()
                )));
            }
        })
    }

    /// The decision the flags give for `pending`, or `None` when the prompt asks: the verdict
    /// and the feedback, then for a plan the `--sha256` pin, `--to` and `--plan-file`, and for
    /// a tool call `--always`, pinned to the call's `argsSha256`. Call [`DecisionArgs::check`]
    /// first.
    pub(crate) fn fixed(&self, pending: &PendingDecision) -> Option<Decision> {
        if let (Some(suspended), true) = (pending.as_suspension(), self.answers()) {
            // `check` refused an answer that cannot be read before anything was shown.
            let mut decision = Decision::answer(self.answer_for(suspended).ok()?);
            decision = decision.with_sha256(self.sha256.as_deref().unwrap_or(pending.sha256()));
            return Some(self.signed(decision));
        }
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
        match pending {
            PendingDecision::ToolCall(call) => {
                if self.always {
                    decision = decision.always_allow();
                    if let Some(scope) = self.scope {
                        decision = decision.scope(scope);
                    }
                    if let Some(pattern) = &self.allow {
                        decision = decision.allow_only(pattern.clone());
                    }
                }
                decision = decision.with_sha256(call.args_sha256());
            }
            _ => {
                if let Some(sha256) = &self.sha256 {
                    decision = decision.with_sha256(sha256);
                }
                if let Some(to) = &self.to {
                    decision = decision.to(to);
                }
                if let Some(text) = &self.edited {
                    decision = decision.with_plan(text);
                }
                for comment in &self.comments {
                    decision = decision.comment(comment.line, &comment.text);
                }
                if let (true, Some(model)) = (self.approve, &self.model_for_next) {
                    decision = decision.model(model);
                }
            }
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

    /// Refuses the flags that do not go with `pending` before anything is shown or decided:
    /// `--always` on a plan, `--to` or `--plan-file` on a tool call, an `--allow-*` pattern the
    /// library refuses
    /// ([`AllowancePattern::matcher`](agent_controller::allowance::AllowancePattern::matcher),
    /// exit 2), and a `--sha256` that names other content than what waits (exit 5; the library's pin check,
    /// [`PendingDecision::check_sha256`]).
    pub(crate) fn check(&self, pending: &PendingDecision) -> Result<(), Failure> {
        let id = neutralize_line(pending.decision_id());
        // An answer is no approval: nothing an answer gives can be always allowed.
        if self.always && self.answers() {
            return Err(Failure::invalid(format!(
                "--always goes with --approve of a tool call, not with {}: an answer allows nothing later; nothing was decided",
                self.answer_flag()
            )));
        }
        match (pending.as_suspension(), self.answers()) {
            (Some(suspended), true) => {
                self.answer_for(suspended)?;
            }
            (Some(_), false) if self.approve => {
                return Err(Failure::invalid(format!(
                    "decision {id} is a question ({}): answer it with --answer or --answer-json, or decline it with --reject; nothing was decided",
                    neutralize_line(pending.tool_name())
                )));
            }
            (None, true) => {
                return Err(Failure::invalid(format!(
                    "{} goes with a question, and decision {id} is a {}: approve or reject it; nothing was decided",
                    self.answer_flag(),
                    if pending.as_plan().is_some() {
                        "plan"
                    } else {
                        "tool call"
                    }
                )));
            }
            _ => {}
        }
        let flag = match pending {
            PendingDecision::ToolCall(_) if self.to.is_some() => Some("--to"),
            PendingDecision::ToolCall(_) if self.plan_file.is_some() => Some("--plan-file"),
            PendingDecision::ToolCall(_) if !self.comments.is_empty() => Some("--comment"),
            PendingDecision::ToolCall(_) if self.model_for_next.is_some() => {
                Some("--model-for-next")
            }
            _ => None,
        };
        if let Some(flag) = flag {
            return Err(Failure::invalid(format!(
                "{flag} goes with a plan, and decision {id} is a tool call ({}): nothing was decided",
                neutralize_line(pending.tool_name())
            )));
        }
        if self.always && pending.as_plan().is_some() {
            return Err(Failure::invalid(format!(
                "--always goes with a tool call, and decision {id} is a plan: nothing was decided"
            )));
        }
        if let Some(pattern) = &self.allow
            && let Err(error) = pattern.matcher()
        {
            let flag = match (&pattern.glob, &pattern.regex) {
                (Some(_), _) => "--allow-glob",
                (_, Some(_)) => "--allow-regex",
                _ => "--allow-path",
            };
            return Err(Failure::invalid(neutralize_line(&format!(
                "{flag} cannot narrow the allowance ({pattern}): {error}; nothing was decided"
            ))));
        }
        let Some(pinned) = self.sha256.as_ref() else {
            return Ok(());
        };
        if pending.check_sha256(pinned).is_ok() {
            return Ok(());
        }
        let sha256 = neutralize_line(pending.sha256());
        Err(Failure::refused(match pending {
            PendingDecision::ToolCall(call) => format!(
                "the tool call {id} ({}) has argsSha256 {sha256}, not {pinned}: it is not the call you meant; nothing was decided",
                neutralize_line(call.tool_name()),
            ),
            PendingDecision::Suspension(suspended) => format!(
                "the {} {id} ({}) has payloadSha256 {sha256}, not {pinned}: it is not the {} you meant; nothing was decided",
                suspension_noun(suspended),
                neutralize_line(suspended.tool_name()),
                suspension_noun(suspended),
            ),
            _ => format!(
                "the pending plan has sha256 {sha256}, not {pinned}: it is not the plan you meant; nothing was decided"
            ),
        }))
    }

    /// The answer flag given, for messages: `--answer-json` or `--answer`.
    fn answer_flag(&self) -> &'static str {
        if self.answer_json.is_some() {
            "--answer-json"
        } else {
            "--answer"
        }
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
}

/// What a suspended call is called in messages: a `question` (of `ask_user`), else a
/// `suspended call`.
fn suspension_noun(suspended: &agent_controller::session::PendingSuspension) -> &'static str {
    match suspended.kind() {
        agent_controller::event::SuspensionKind::Question => "question",
        _ => "suspended call",
    }
}
