//! Small enums whose variants each have one name in text, the same everywhere: in `Display`,
//! in `FromStr`, and in JSON and TOML (serde). Written once here instead of derived per enum
//! (the derive crates cost the core five dependencies; see the README, section "Features").

/// Declares a fieldless enum whose variants are written `Variant = "name"`, and gives it
/// `as_str`, `NAMES`, `Display`, `FromStr` (error [`crate::error::UnknownName`]) and serde's
/// `Serialize` / `Deserialize`, all from those names, and with the `schema` feature
/// `schemars::JsonSchema` (a string naming one of them). Attributes and doc comments pass through.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// Every variant's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The variant's name: what `Display` writes and `FromStr` reads.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )+
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
                match text {
                    $( $text => Ok(Self::$variant), )+
                    _ => Err($crate::error::UnknownName::new(text, Self::NAMES)),
                }
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

#[cfg(test)]
mod tests {
    use crate::diagram::DiagramFormat;
    use crate::event::{CancelReason, RunState};

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
