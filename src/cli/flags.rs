//! What the decision flags (`--approve`, `--reject`, `--sha256`, ...) decide.

use agent_controller::display::neutralize_line;
use agent_controller::terminal::answer_from_flags;
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

    /// The answer the flags give for `suspended`: the JSON of `--answer-json`, or the texts of
    /// `--answer`, each a label or an option's number (the library's
    /// [`answer_from_flags`], which checks the answer and lists the labels when it does not fit).
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
        answer_from_flags(&self.answer, suspended.payload()).map_err(|why| {
            Failure::invalid(format!(
                "--answer does not answer decision {}: {}; nothing was answered",
                neutralize_line(suspended.decision_id()),
                neutralize_line(&why)
            ))
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
                if let (true, Some(steps)) = (self.approve, &self.steps) {
                    decision = decision.steps(steps.0.iter().copied());
                }
            }
        }
        Some(self.signed(decision))
    }

    /// Refuses a flag that does not go with the verdict given ([`FLAGS`], exit 2), then reads
    /// and checks --plan-file (a regular file, at most 1 MiB, UTF-8, not blank) into the
    /// edited plan: before any store is opened or anything decided.
    pub(crate) fn prepare(&mut self) -> Result<(), Failure> {
        self.check_verdict()?;
        let Some(path) = &self.plan_file else {
            return Ok(());
        };
        let text = submit_plan::read_plan_file(path)
            .map_err(|e| Failure::invalid(neutralize_line(&format!("--plan-file: {e}"))))?;
        self.edited = Some(text);
        Ok(())
    }

    /// The verdict the flags give: the prompt's when none is.
    fn verdict(&self) -> Verdict {
        if self.approve {
            Verdict::Approve
        } else if self.reject {
            Verdict::Reject
        } else if self.answer_json.is_some() {
            Verdict::AnswerJson
        } else if !self.answer.is_empty() {
            Verdict::Answer
        } else {
            Verdict::Prompt
        }
    }

    /// Refuses the first flag given that [`FLAGS`] says does not go with the verdict given.
    fn check_verdict(&self) -> Result<(), Failure> {
        let verdict = self.verdict();
        let Some(rule) = FLAGS
            .iter()
            .find(|r| (r.given)(self) && !r.verdicts.contains(&verdict))
        else {
            return Ok(());
        };
        let not = match verdict {
            Verdict::Prompt => "and no verdict flag is given".to_owned(),
            given => format!("not with {}", given.flag()),
        };
        Err(Failure::invalid(format!(
            "{} goes with {}, {not}: nothing was decided",
            rule.flag,
            rule.goes_with()
        )))
    }

    /// Refuses the flags that do not go with `pending` before anything is shown or decided:
    /// an answer that does not fit the question, a flag whose row of [`FLAGS`] leaves out the
    /// kind of decision that waits (`--always` on a plan, `--to` or `--plan-file` on a tool
    /// call, `--approve` on a question, ...), an `--allow-*` pattern the library refuses
    /// ([`AllowancePattern::matcher`](agent_controller::allowance::AllowancePattern::matcher),
    /// exit 2), and a `--sha256` that names other content than what waits (exit 5; the library's pin check,
    /// [`PendingDecision::check_sha256`]).
    pub(crate) fn check(&self, pending: &PendingDecision) -> Result<(), Failure> {
        let id = neutralize_line(pending.decision_id());
        if let (Some(suspended), true) = (pending.as_suspension(), self.answers()) {
            self.answer_for(suspended)?;
        }
        let kind = Kind::of(pending);
        if let Some(rule) = FLAGS
            .iter()
            .find(|r| (r.given)(self) && !r.kinds.contains(&kind))
        {
            let tool = match kind {
                Kind::Plan => String::new(),
                _ => format!(" ({})", neutralize_line(pending.tool_name())),
            };
            let hint = match (rule.verdict, kind) {
                (false, _) => "",
                (true, Kind::Question) => {
                    " answer it with --answer or --answer-json, or decline it with --reject;"
                }
                (true, _) => " approve or reject it;",
            };
            return Err(Failure::invalid(format!(
                "{} goes with {}, and decision {id} is {}{tool}:{hint} nothing was decided",
                rule.flag,
                Kind::list(rule.kinds),
                kind.noun()
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

/// A verdict the flags give: `--approve`, `--reject`, an answer, or none (the prompt asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Approve,
    Reject,
    Answer,
    AnswerJson,
    Prompt,
}

impl Verdict {
    /// The flag that gives it, for messages.
    fn flag(self) -> &'static str {
        match self {
            Verdict::Approve => "--approve",
            Verdict::Reject => "--reject",
            Verdict::Answer => "--answer",
            Verdict::AnswerJson => "--answer-json",
            Verdict::Prompt => "the prompt",
        }
    }
}

/// The kind of decision that waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plan,
    ToolCall,
    Question,
}

impl Kind {
    fn of(pending: &PendingDecision) -> Kind {
        match pending {
            PendingDecision::Suspension(_) => Kind::Question,
            PendingDecision::ToolCall(_) => Kind::ToolCall,
            _ => Kind::Plan,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Plan => "a plan",
            Kind::ToolCall => "a tool call",
            Kind::Question => "a question",
        }
    }

    /// `kinds` for messages: `a plan or a tool call`.
    fn list(kinds: &[Kind]) -> String {
        kinds
            .iter()
            .map(|k| k.noun())
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// One decision flag: the verdicts it goes with and the kinds of decision it decides.
struct FlagRule {
    flag: &'static str,
    given: fn(&DecisionArgs) -> bool,
    verdicts: &'static [Verdict],
    kinds: &'static [Kind],
    /// A verdict flag itself: its refusal says what the decision takes instead.
    verdict: bool,
}

impl FlagRule {
    /// What the flag goes with, for messages: `--approve of a plan`.
    fn goes_with(&self) -> String {
        let verdicts: Vec<&str> = self
            .verdicts
            .iter()
            .filter(|v| **v != Verdict::Prompt)
            .map(|v| v.flag())
            .collect();
        let mut text = verdicts.join(" or ");
        if self.verdicts.contains(&Verdict::Prompt) {
            text.push_str(" (or the prompt)");
        }
        if self.kinds.len() < ALL_KINDS.len() {
            text.push_str(&format!(" of {}", Kind::list(self.kinds)));
        }
        text
    }
}

use Kind::{Plan, Question, ToolCall};
use Verdict::{Answer, AnswerJson, Approve, Prompt, Reject};

const ALL_KINDS: &[Kind] = &[Plan, ToolCall, Question];
const ANSWERS: &[Verdict] = &[Answer, AnswerJson];

/// Which decision flag goes with which verdict and which kind of decision: the one table
/// [`DecisionArgs::prepare`] checks the flags against before anything is opened, and
/// [`DecisionArgs::check`] checks them against what waits, before anything is shown or decided.
/// A flag given where its row does not allow it is refused (exit 2), naming it, and nothing is
/// decided. (`--sha256` and `--by` go with every verdict and kind; `--scope` and the
/// `--allow-*` patterns need `--always`, which clap checks.)
const FLAGS: &[FlagRule] = &[
    FlagRule {
        flag: "--approve",
        given: |a| a.approve,
        verdicts: &[Approve],
        kinds: &[Plan, ToolCall],
        verdict: true,
    },
    FlagRule {
        flag: "--answer",
        given: |a| !a.answer.is_empty(),
        verdicts: ANSWERS,
        kinds: &[Question],
        verdict: true,
    },
    FlagRule {
        flag: "--answer-json",
        given: |a| a.answer_json.is_some(),
        verdicts: ANSWERS,
        kinds: &[Question],
        verdict: true,
    },
    FlagRule {
        flag: "--feedback",
        given: |a| a.feedback.is_some(),
        verdicts: &[Approve, Reject],
        kinds: ALL_KINDS,
        verdict: false,
    },
    FlagRule {
        flag: "--to",
        given: |a| a.to.is_some(),
        verdicts: &[Approve],
        kinds: &[Plan],
        verdict: false,
    },
    FlagRule {
        flag: "--plan-file",
        given: |a| a.plan_file.is_some(),
        verdicts: &[Approve],
        kinds: &[Plan],
        verdict: false,
    },
    FlagRule {
        flag: "--comment",
        given: |a| !a.comments.is_empty(),
        verdicts: &[Reject],
        kinds: &[Plan],
        verdict: false,
    },
    FlagRule {
        flag: "--model-for-next",
        given: |a| a.model_for_next.is_some(),
        verdicts: &[Approve, Prompt],
        kinds: &[Plan],
        verdict: false,
    },
    FlagRule {
        flag: "--steps",
        given: |a| a.steps.is_some(),
        verdicts: &[Approve],
        kinds: &[Plan],
        verdict: false,
    },
    FlagRule {
        flag: "--always",
        given: |a| a.always,
        verdicts: &[Approve],
        kinds: &[ToolCall],
        verdict: false,
    },
    FlagRule {
        flag: "--scope",
        given: |a| a.scope.is_some(),
        verdicts: &[Approve],
        kinds: &[ToolCall],
        verdict: false,
    },
    FlagRule {
        flag: "--allow-path, --allow-arg, --allow-glob or --allow-regex",
        given: |a| a.allow.is_some(),
        verdicts: &[Approve],
        kinds: &[ToolCall],
        verdict: false,
    },
];
