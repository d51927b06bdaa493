//! Small enums whose variants each have one name in text, the same everywhere: in `Display`,
//! in `FromStr`, and in JSON and TOML (serde). Written once here instead of derived per enum
//! (the derive crates cost the core five dependencies; see the README, section "Features").
//!
//! A variant's name is its identifier in snake_case (`UnknownField` is `unknown_field`),
//! worked out at compile time by [`snake_case`]: the identifier is the one place a name is
//! written, so the two cannot drift apart.

/// Declares a fieldless enum and gives it `as_str`, `NAMES`, `Display`, `FromStr` (error
/// [`crate::error::UnknownName`]) and serde's `Serialize` / `Deserialize`, all from each
/// variant's name (its identifier in snake_case), and with the `schema` feature
/// `schemars::JsonSchema` (a string naming one of them). Attributes and doc comments pass through.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// Every variant's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(snake_name!($variant)),+];

            /// The variant's name: what `Display` writes and `FromStr` reads.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => snake_name!($variant), )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::error::UnknownName;

            fn from_str(text: &str) -> ::std::result::Result<Self, Self::Err> {
                [$(Self::$variant),+]
                    .into_iter()
                    .find(|variant| variant.as_str() == text)
                    .ok_or_else(|| $crate::error::UnknownName::new(text, Self::NAMES))
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        // The schema of the name: a string, one of `NAMES`. Inlined, so the field that holds it
        // keeps its own description.
        #[cfg(feature = "schema")]
        impl ::schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(stringify!($name))
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string", "enum": Self::NAMES })
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::std::result::Result<Self, D::Error> {
                let text = <::std::string::String>::deserialize(deserializer)?;
                text.parse().map_err(|_| {
                    <D::Error as ::serde::de::Error>::unknown_variant(&text, Self::NAMES)
                })
            }
        }
    };
}

/// The name of the variant `$variant`: its identifier in snake_case, as a `&'static str` made at
/// compile time.
macro_rules! snake_name {
    ($variant:ident) => {{
        const IDENT: &str = stringify!($variant);
        const NAME: [u8; $crate::names::snake_case_len(IDENT)] = $crate::names::snake_case(IDENT);
        match ::std::str::from_utf8(&NAME) {
            Ok(name) => name,
            Err(_) => panic!("an identifier in snake_case is UTF-8"),
        }
    }};
}

/// How many bytes `ident` takes in snake_case: one more for each capital after the first byte
/// (each gets a `_` before it).
pub(crate) const fn snake_case_len(ident: &str) -> usize {
    let bytes = ident.as_bytes();
    let mut len = bytes.len();
    let mut at = 1;
    while at < bytes.len() {
        if bytes[at].is_ascii_uppercase() {
            len += 1;
        }
        at += 1;
    }
    len
}

/// `ident` in snake_case (`UnknownField` is `unknown_field`, `Sha256Mismatch` is
/// `sha256_mismatch`): each capital lowered, with a `_` before it unless it comes first. `N` is
/// [`snake_case_len`] of `ident`.
pub(crate) const fn snake_case<const N: usize>(ident: &str) -> [u8; N] {
    let bytes = ident.as_bytes();
    let mut name = [0; N];
    let (mut from, mut to) = (0, 0);
    while from < bytes.len() {
        let byte = bytes[from];
        if byte.is_ascii_uppercase() && from > 0 {
            name[to] = b'_';
            to += 1;
        }
        name[to] = byte.to_ascii_lowercase();
        from += 1;
        to += 1;
    }
    name
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
            [Mode, Session, Workspace],
            ["mode", "session", "workspace"]
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
            [Approved, Rejected],
            ["approved", "rejected"]
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
            [Approved, Rejected, Cancelled, Expired],
            ["approved", "rejected", "cancelled", "expired"]
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
        check!(PendingKind, [Plan, ToolCall], ["plan", "tool_call"]);
        check!(RuleAction, [Allow, Ask, Deny], ["allow", "ask", "deny"]);
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
                InvalidMcpServer,
                DuplicateMcpServer,
                UnknownMcpServer,
                InvalidMcpToolName,
                UntrustedWildcard
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
                "invalid_mcp_server",
                "duplicate_mcp_server",
                "unknown_mcp_server",
                "invalid_mcp_tool_name",
                "untrusted_wildcard"
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
                    ExpireTool
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
                    "expire_tool"
                ]
            );
            check!(
                Aspect,
                [
                    Outcome, Events, Mode, Pending, Run, Allowances, Workspace, Invariant, Panic
                ],
                [
                    "outcome",
                    "events",
                    "mode",
                    "pending",
                    "run",
                    "allowances",
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
            super::snake_case_len("Sha256Mismatch"),
            "sha256_mismatch".len()
        );
        assert_eq!(
            &super::snake_case::<15>("Sha256Mismatch"),
            b"sha256_mismatch"
        );
        assert_eq!(&super::snake_case::<1>("A"), b"a");
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
