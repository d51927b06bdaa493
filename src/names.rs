//! Small enums whose variants each have one name in text, the same everywhere: in `Display`,
//! in `FromStr`, and in JSON and TOML (serde). Each enum derives them from `strum` and serde
//! (`serialize_all` / `rename_all = "snake_case"`: `UnknownField` is `unknown_field`), keeps
//! `as_str` and `NAMES`, and refuses an unknown name with [`crate::error::UnknownName`]; the
//! tests below list every name, so a derive cannot change one.

/// A name that is none of an enum's variants (`"complete"` for a [`crate::event::RunState`]): the error
/// of `FromStr` for the crate's small enums ([`crate::event::RunState`], [`crate::event::CancelReason`],
/// [`crate::diagram::DiagramFormat`], ...).
///
/// # Examples
/// ```
/// use agent_controller::event::RunState;
/// let error = "complete".parse::<RunState>().unwrap_err();
/// assert_eq!(error.name(), "complete");
/// assert!(error.expected().contains(&"completed"));
/// assert!(error.to_string().starts_with("unknown name `complete`: did you mean `completed`? expected one of"), "{error}");
/// let error = "Running".parse::<RunState>().unwrap_err();
/// assert!(error.to_string().contains("did you mean `running`? (names are case-sensitive)"), "{error}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown name `{name}`: {}expected one of {}",
    crate::hint::hint(name, expected.iter().copied(), "names").map(|hint| format!("{hint} ")).unwrap_or_default(),
    expected.join(", ")
)]
pub struct UnknownName {
    name: String,
    expected: &'static [&'static str],
}

impl UnknownName {
    pub(crate) fn new(name: &str, expected: &'static [&'static str]) -> Self {
        Self {
            name: name.to_owned(),
            expected,
        }
    }

    /// The error for `name`, which is none of `T`'s names (strum's `parse_err_fn`).
    pub(crate) fn of<T: strum::VariantNames>(name: &str) -> Self {
        Self::new(name, T::VARIANTS)
    }

    /// The name that was given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The names that would have been understood.
    pub fn expected(&self) -> &'static [&'static str] {
        self.expected
    }
}

/// The JSON Schema of a name of `T`: a string, one of its names, inlined so the field that
/// holds it keeps its own description.
#[cfg(feature = "schema")]
pub(crate) fn schema<T: strum::VariantNames>(
    _: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": T::VARIANTS })
}

#[cfg(test)]
mod tests {
    use crate::diagram::DiagramFormat;
    use crate::event::{CancelReason, RunState};

    /// Every name of every named enum, in declaration order: `NAMES`, `as_str` and `Display`
    /// write it, `FromStr` reads it, and it is the enum's form in JSON and in TOML, both ways
    /// (issue 36: the names stay exactly as they are when the enums' code is derived).
    #[test]
    fn every_name_of_every_named_enum_in_text_json_and_toml() {
        fn names<T>(names: &[&str], variants: &[T])
        where
            T: Copy
                + PartialEq
                + std::fmt::Debug
                + std::fmt::Display
                + std::str::FromStr
                + serde::Serialize
                + serde::de::DeserializeOwned,
        {
            assert_eq!(names.len(), variants.len());
            for (name, variant) in names.iter().zip(variants) {
                assert_eq!(variant.to_string(), *name);
                assert_eq!(name.parse::<T>().ok(), Some(*variant), "{name}");
                let json = serde_json::to_string(variant).expect("JSON");
                assert_eq!(json, format!("\"{name}\""));
                assert_eq!(serde_json::from_str::<T>(&json).ok(), Some(*variant));
                #[derive(serde::Serialize, serde::Deserialize)]
                struct Field<T> {
                    name: T,
                }
                let toml = toml::to_string(&Field { name: *variant }).expect("TOML");
                assert_eq!(toml.trim_end(), format!("name = \"{name}\""));
                let back: Field<T> = toml::from_str(&toml).expect("TOML back");
                assert_eq!(back.name, *variant);
                assert!(
                    name.to_uppercase().parse::<T>().is_err(),
                    "{name}: case-sensitive"
                );
            }
        }
        macro_rules! check {
            ($ty:ty, [$($variant:ident),+], [$($name:literal),+]) => {{
                assert_eq!(<$ty>::NAMES, [$($name),+]);
                let variants = [$(<$ty>::$variant),+];
                assert_eq!(variants.map(<$ty>::as_str), [$($name),+]);
                names(&[$($name),+], &variants);
            }};
        }
        use crate::allowance::AllowanceScope;
        use crate::config::ConfigErrorKind as C;
        use crate::event::{DecisionOutcome, ModeChangeReason, OnTimeout};
        use crate::model::ModelErrorKind;
        use crate::rules::RuleAction;
        use crate::session::{DecisionAction, SessionErrorKind};
        use crate::store::PendingKind;
        check!(
            AllowanceScope,
            [Mode, Session, Workspace, Plan],
            ["mode", "session", "workspace", "plan"]
        );
        check!(
            crate::plan::PlanScopePolicy,
            [Ask, Enforce, Off],
            ["ask", "enforce", "off"]
        );
        check!(DiagramFormat, [Mermaid, Dot], ["mermaid", "dot"]);
        check!(
            ModelErrorKind,
            [
                Authentication,
                RateLimited,
                Transport,
                MalformedResponse,
                ContextLength,
                Overloaded,
                InvalidRequest,
                StepLimit,
                RevisionLimit,
                Other
            ],
            [
                "authentication",
                "rate_limited",
                "transport",
                "malformed_response",
                "context_length",
                "overloaded",
                "invalid_request",
                "step_limit",
                "revision_limit",
                "other"
            ]
        );
        check!(
            DecisionAction,
            [Approved, Rejected, Answered],
            ["approved", "rejected", "answered"]
        );
        check!(
            ModeChangeReason,
            [Manual, PlanApproved],
            ["manual", "plan_approved"]
        );
        check!(
            RunState,
            [Running, Suspended, Completed, Aborted, Failed],
            ["running", "suspended", "completed", "aborted", "failed"]
        );
        check!(
            CancelReason,
            [Aborted, UserMessage, ModeSwitch],
            ["aborted", "user_message", "mode_switch"]
        );
        check!(OnTimeout, [Reject, Abort], ["reject", "abort"]);
        check!(
            DecisionOutcome,
            [Approved, Rejected, Cancelled, Expired, Answered],
            ["approved", "rejected", "cancelled", "expired", "answered"]
        );
        check!(
            SessionErrorKind,
            [
                NotFound,
                AlreadyDecided,
                Expired,
                Mismatch,
                InvalidInput,
                WrongState,
                Conflict,
                Store,
                Workspace
            ],
            [
                "not_found",
                "already_decided",
                "expired",
                "mismatch",
                "invalid_input",
                "wrong_state",
                "conflict",
                "store",
                "workspace"
            ]
        );
        check!(
            PendingKind,
            [Plan, ToolCall, Question, Suspension],
            ["plan", "tool_call", "question", "suspension"]
        );
        check!(
            crate::event::SuspensionKind,
            [Question, Suspension],
            ["question", "suspension"]
        );
        check!(RuleAction, [Allow, Ask, Deny], ["allow", "ask", "deny"]);
        check!(
            crate::explain::Outcome,
            [Allow, Ask, Deny, Unavailable],
            ["allow", "ask", "deny", "unavailable"]
        );
        check!(
            C,
            [
                Io,
                Syntax,
                UnknownField,
                InvalidType,
                MissingField,
                NoModes,
                InvalidId,
                DuplicateId,
                SelfTransition,
                UnknownTarget,
                DuplicateTarget,
                DuplicateTool,
                EmptyTargets,
                UnknownDefaultModeId,
                MultipleDefaults,
                ConflictingDefault,
                UnknownTool,
                TargetWithoutSubmitPlan,
                SelfHandover,
                NoPlanWriter,
                PlanningModeWrites,
                InvalidPlansDir,
                NotUtf8,
                ApprovalToolNotOffered,
                ApprovalOfSubmitPlan,
                InvalidApprovalTimeout,
                DuplicateName,
                EmptyName,
                KnownKeyInMetadata,
                InvalidOnTimeout,
                InvalidRule,
                InvalidPattern,
                RuleToolNotOffered,
                UnknownArgument,
                ShadowedRule,
                WildcardRuleWithoutArg,
                PlansDirNotDedicated,
                UnknownSubagent,
                InvalidMcpServer,
                DuplicateMcpServer,
                UnknownMcpServer,
                InvalidMcpToolName,
                UntrustedWildcard,
                InvalidPlanScope,
                InvalidRuleTest,
                FailedRuleTest,
                InvalidHook,
                InvalidReviewer,
                UnknownReviewer,
                InvalidApprovers,
                NotEnforced,
                LayerConflict,
                ManagedOverride
            ],
            [
                "io",
                "syntax",
                "unknown_field",
                "invalid_type",
                "missing_field",
                "no_modes",
                "invalid_id",
                "duplicate_id",
                "self_transition",
                "unknown_target",
                "duplicate_target",
                "duplicate_tool",
                "empty_targets",
                "unknown_default_mode_id",
                "multiple_defaults",
                "conflicting_default",
                "unknown_tool",
                "target_without_submit_plan",
                "self_handover",
                "no_plan_writer",
                "planning_mode_writes",
                "invalid_plans_dir",
                "not_utf8",
                "approval_tool_not_offered",
                "approval_of_submit_plan",
                "invalid_approval_timeout",
                "duplicate_name",
                "empty_name",
                "known_key_in_metadata",
                "invalid_on_timeout",
                "invalid_rule",
                "invalid_pattern",
                "rule_tool_not_offered",
                "unknown_argument",
                "shadowed_rule",
                "wildcard_rule_without_arg",
                "plans_dir_not_dedicated",
                "unknown_subagent",
                "invalid_mcp_server",
                "duplicate_mcp_server",
                "unknown_mcp_server",
                "invalid_mcp_tool_name",
                "untrusted_wildcard",
                "invalid_plan_scope",
                "invalid_rule_test",
                "failed_rule_test",
                "invalid_hook",
                "invalid_reviewer",
                "unknown_reviewer",
                "invalid_approvers",
                "not_enforced",
                "layer_conflict",
                "managed_override"
            ]
        );
        #[cfg(feature = "testing")]
        {
            use crate::testing::{Aspect, Cause, Mutation};
            check!(
                Cause,
                [
                    Approve,
                    Reject,
                    RejectWithFeedback,
                    Abort,
                    UserMessage,
                    Manual,
                    ApproveTool,
                    RejectTool,
                    AlwaysAllowTool,
                    ManualEndsAlwaysAllow,
                    ApprovalEndsAlwaysAllow,
                    RuleDeny,
                    RuleAsk,
                    RuleAllow,
                    Expire,
                    ExpireTool,
                    AnswerQuestion,
                    DeclineQuestion,
                    AbortQuestion,
                    ExpireQuestion,
                    AnswerBesideTool,
                    AnswerThenApprove,
                    SubagentAnswers,
                    SubagentRefused,
                    ApproveChildTool,
                    RejectChildTool,
                    AnswerChildQuestion,
                    ChildBesideTool,
                    AbortChild
                ],
                [
                    "approve",
                    "reject",
                    "reject_with_feedback",
                    "abort",
                    "user_message",
                    "manual",
                    "approve_tool",
                    "reject_tool",
                    "always_allow_tool",
                    "manual_ends_always_allow",
                    "approval_ends_always_allow",
                    "rule_deny",
                    "rule_ask",
                    "rule_allow",
                    "expire",
                    "expire_tool",
                    "answer_question",
                    "decline_question",
                    "abort_question",
                    "expire_question",
                    "answer_beside_tool",
                    "answer_then_approve",
                    "subagent_answers",
                    "subagent_refused",
                    "approve_child_tool",
                    "reject_child_tool",
                    "answer_child_question",
                    "child_beside_tool",
                    "abort_child"
                ]
            );
            check!(
                Aspect,
                [
                    Outcome, Events, Mode, Pending, Run, Allowances, Tasks, Workspace, Invariant,
                    Panic
                ],
                [
                    "outcome",
                    "events",
                    "mode",
                    "pending",
                    "run",
                    "allowances",
                    "tasks",
                    "workspace",
                    "invariant",
                    "panic"
                ]
            );
            check!(
                Mutation,
                [
                    DuplicateId,
                    UnknownTarget,
                    SelfTarget,
                    DuplicateTarget,
                    TwoDefaults,
                    ConflictingDefault,
                    UnknownKey,
                    WrongType,
                    TargetWithoutSubmitPlan,
                    SelfHandover,
                    ApprovalToolNotOffered,
                    ApprovalOfSubmitPlan,
                    DuplicateTool
                ],
                [
                    "duplicate_id",
                    "unknown_target",
                    "self_target",
                    "duplicate_target",
                    "two_defaults",
                    "conflicting_default",
                    "unknown_key",
                    "wrong_type",
                    "target_without_submit_plan",
                    "self_handover",
                    "approval_tool_not_offered",
                    "approval_of_submit_plan",
                    "duplicate_tool"
                ]
            );
        }
    }

    /// `Display`, `FromStr` and serde agree on every name, and the names are the wire format
    /// that records and events of earlier releases used.
    #[test]
    fn every_name_round_trips_through_display_from_str_and_serde() {
        assert_eq!(
            RunState::NAMES,
            ["running", "suspended", "completed", "aborted", "failed"]
        );
        assert_eq!(
            CancelReason::NAMES,
            ["aborted", "user_message", "mode_switch"]
        );
        for name in RunState::NAMES.iter().chain(CancelReason::NAMES) {
            let json = serde_json::json!(name);
            if let Ok(state) = name.parse::<RunState>() {
                assert_eq!(state.to_string(), *name);
                assert_eq!(serde_json::to_value(state).expect("json"), json);
                assert_eq!(
                    serde_json::from_value::<RunState>(json.clone()).ok(),
                    Some(state)
                );
            }
            if let Ok(reason) = name.parse::<CancelReason>() {
                assert_eq!(reason.as_str(), *name);
                assert_eq!(
                    serde_json::from_value::<CancelReason>(json).ok(),
                    Some(reason)
                );
            }
        }
        assert_eq!(
            format!("{:>7}", DiagramFormat::Dot),
            "    dot",
            "Display pads"
        );
    }

    /// A name is the identifier in snake_case: a `_` before each capital but the first, digits
    /// kept where they stand.
    #[test]
    fn a_name_is_the_identifier_in_snake_case() {
        use crate::config::ConfigErrorKind;
        use crate::session::SessionErrorKind;
        assert_eq!(ConfigErrorKind::UnknownField.as_str(), "unknown_field");
        assert_eq!(SessionErrorKind::NotFound.to_string(), "not_found");
        assert_eq!(RunState::Suspended.as_str(), "suspended");
        assert_eq!(
            "invalid_type".parse::<ConfigErrorKind>(),
            Ok(ConfigErrorKind::InvalidType)
        );
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_names_expected() {
        let error = "Completed"
            .parse::<RunState>()
            .expect_err("names are case-sensitive");
        assert_eq!(error.name(), "Completed");
        assert_eq!(error.expected(), RunState::NAMES);
        assert!(error.to_string().contains("completed"), "{error}");
        let json = serde_json::from_str::<RunState>("\"complete\"").expect_err("unknown");
        assert!(
            json.to_string().contains("unknown variant `complete`"),
            "{json}"
        );
        assert!(
            serde_json::from_str::<RunState>("3").is_err(),
            "not a string"
        );
    }
}
