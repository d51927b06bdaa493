//! What a suspending call of the kit asks ([`Ask`]): the kit's question to `ask_user` in each
//! of its shapes (one option, several options, free text), or the kit's own suspending tool
//! ([`ConfirmTool`], whose answer is an object); and the answers the kit gives
//! ([`AnswerChoice`]), with whether each fits. The arguments' and payloads' hashes are written
//! out here, in RFC 8785 canonical JSON, rather than read from the library.

use async_trait::async_trait;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::tool::{ASK_USER, Tool, ToolContext, ToolOutput};

/// The question every kit call of `ask_user` asks ([`Ask::args`]).
pub const QUESTION: &str = "Which target?";

/// The options of the kit's select questions ([`Ask::Select`], [`Ask::MultiSelect`]):
/// [`AnswerChoice::Fits`] picks the first (and, for a multi select, both).
pub const QUESTION_OPTIONS: [&str; 2] = ["staging", "production"];

/// The name of the kit's own suspending tool ([`ConfirmTool`]). A mode that lists it in
/// `availableTools` offers it, and the kit's reference takes every call of it for one that
/// suspends: do not give a tool of your own this name.
pub const CONFIRM_TOOL: &str = "kit_confirm";

/// The deploy target [`ConfirmTool`] asks the user to confirm: its whole payload.
const CONFIRM_TARGET: &str = "staging";

/// What a call of a suspending tool asks the user, as the kit's model makes it
/// ([`crate::testing::Call::Ask`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ask {
    /// `ask_user` with [`QUESTION_OPTIONS`], one to pick (`single_select`, the default):
    /// answered by a label.
    Select,
    /// `ask_user` with [`QUESTION_OPTIONS`] and `selectionMode` `multi_select`: answered by an
    /// array of labels, each at most once.
    MultiSelect,
    /// `ask_user` without options: answered by any text.
    FreeText,
    /// The kit's own tool [`CONFIRM_TOOL`] ([`ConfirmTool`]), kind `suspension`: answered by
    /// an object `{"confirm": true|false}` and nothing else.
    Confirm,
}

impl Ask {
    /// Every shape, the questions first.
    pub const ALL: [Ask; 4] = [Ask::Select, Ask::MultiSelect, Ask::FreeText, Ask::Confirm];

    /// The tool that asks it: `ask_user`, or [`CONFIRM_TOOL`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::{Ask, CONFIRM_TOOL};
    /// assert_eq!(Ask::FreeText.tool(), "ask_user");
    /// assert_eq!(Ask::Confirm.tool(), CONFIRM_TOOL);
    /// ```
    pub fn tool(self) -> &'static str {
        match self {
            Ask::Select | Ask::MultiSelect | Ask::FreeText => ASK_USER,
            Ask::Confirm => CONFIRM_TOOL,
        }
    }

    /// What a call of tool `name` with the kit's plain arguments asks: `ask_user`'s is the
    /// select question, [`CONFIRM_TOOL`]'s its confirmation; `None` for any other tool.
    pub fn of_tool(name: &str) -> Option<Ask> {
        match name {
            ASK_USER => Some(Ask::Select),
            CONFIRM_TOOL => Some(Ask::Confirm),
            _ => None,
        }
    }

    /// Whether `tool_suspended` names it a `question` (a question of `ask_user`), not a
    /// `suspension`.
    pub fn is_question(self) -> bool {
        self != Ask::Confirm
    }

    /// The arguments of the call that asks it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::Ask;
    /// assert_eq!(Ask::Select.args()["options"][1]["label"], "production");
    /// assert_eq!(Ask::MultiSelect.args()["selectionMode"], "multi_select");
    /// assert!(Ask::FreeText.args().get("options").is_none());
    /// ```
    pub fn args(self) -> Value {
        let options: Vec<Value> = QUESTION_OPTIONS
            .iter()
            .map(|label| json!({ "label": label }))
            .collect();
        match self {
            Ask::Select => json!({ "question": QUESTION, "options": options }),
            Ask::MultiSelect => {
                json!({ "question": QUESTION, "options": options, "selectionMode": "multi_select" })
            }
            Ask::FreeText => json!({ "question": QUESTION }),
            Ask::Confirm => json!({}),
        }
    }

    /// The `argsSha256` of the call that asks it (what a `deny` rule's record of it names):
    /// [`Ask::args`] in canonical JSON, written out.
    pub fn args_sha256(self) -> String {
        let question = format!("\"question\":\"{QUESTION}\"");
        sha256(&match self {
            Ask::Select => format!("{{{},{question}}}", options()),
            Ask::MultiSelect => format!(
                "{{{},{question},\"selectionMode\":\"multi_select\"}}",
                options()
            ),
            Ask::FreeText => format!("{{{question}}}"),
            Ask::Confirm => "{}".to_owned(),
        })
    }

    /// The `payloadSha256` it waits under: the SHA-256 of its payload in canonical JSON,
    /// written out (a select question's payload is the question, its options and its
    /// `selectionMode`; a free-text question's the question alone; [`ConfirmTool`]'s the
    /// target).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::Ask;
    /// assert_eq!(Ask::Confirm.payload_sha256(), agent_controller::jcs::sha256(&serde_json::json!({ "target": "staging" })));
    /// assert_ne!(Ask::Select.payload_sha256(), Ask::MultiSelect.payload_sha256());
    /// ```
    pub fn payload_sha256(self) -> String {
        let question = format!("\"question\":\"{QUESTION}\"");
        sha256(&match self {
            Ask::Select => format!(
                "{{{},{question},\"selectionMode\":\"single_select\"}}",
                options()
            ),
            Ask::MultiSelect => format!(
                "{{{},{question},\"selectionMode\":\"multi_select\"}}",
                options()
            ),
            Ask::FreeText => format!("{{{question}}}"),
            Ask::Confirm => format!("{{\"target\":\"{CONFIRM_TARGET}\"}}"),
        })
    }
}

/// `"options":[...]` of [`QUESTION_OPTIONS`] in canonical JSON.
fn options() -> String {
    let options: Vec<String> = QUESTION_OPTIONS
        .iter()
        .map(|label| format!("{{\"label\":\"{label}\"}}"))
        .collect();
    format!("\"options\":[{}]", options.join(","))
}

fn sha256(canonical: &str) -> String {
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The answer an [`crate::testing::Op::Decide`] on a waiting question or suspension carries
/// ([`crate::testing::Subject::Question`]): its value depends on what was asked
/// ([`AnswerChoice::value`]), and so does whether it fits ([`AnswerChoice::fits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnswerChoice {
    /// An answer that fits: the first option, both options of a multi select, a text, a
    /// confirmation. It reaches the tool's `resume` step.
    Fits,
    /// An answer of the right type that is not one the question offers: a label it lacks (in
    /// an array for a multi select), an object without `confirm`. Refused
    /// ([`crate::testing::Refusal::InvalidAnswer`]) and nothing changes, except for a
    /// free-text question, which takes any text.
    NotAnOption,
    /// An answer of the wrong type: a number for a label or a text, a label where an array of
    /// labels goes, a text where the confirmation's object goes. Refused; nothing changes.
    WrongType,
}

impl AnswerChoice {
    /// The answer as JSON, for what `ask` asks.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::{AnswerChoice, Ask};
    /// use serde_json::json;
    /// assert_eq!(AnswerChoice::Fits.value(Ask::Select), "staging");
    /// assert_eq!(AnswerChoice::Fits.value(Ask::MultiSelect), json!(["staging", "production"]));
    /// assert_eq!(AnswerChoice::WrongType.value(Ask::Select), 42);
    /// assert_eq!(AnswerChoice::Fits.value(Ask::Confirm), json!({ "confirm": true }));
    /// ```
    pub fn value(self, ask: Ask) -> Value {
        match (self, ask) {
            (AnswerChoice::Fits, Ask::Select | Ask::FreeText) => json!(QUESTION_OPTIONS[0]),
            (AnswerChoice::Fits, Ask::MultiSelect) => json!(QUESTION_OPTIONS),
            (AnswerChoice::Fits, Ask::Confirm) => json!({ "confirm": true }),
            (AnswerChoice::NotAnOption, Ask::Select | Ask::FreeText) => json!("the moon"),
            (AnswerChoice::NotAnOption, Ask::MultiSelect) => {
                json!([QUESTION_OPTIONS[0], "the moon"])
            }
            (AnswerChoice::NotAnOption, Ask::Confirm) => json!({ "target": "production" }),
            (AnswerChoice::WrongType, Ask::Select | Ask::FreeText) => json!(42),
            (AnswerChoice::WrongType, Ask::MultiSelect) => json!(QUESTION_OPTIONS[0]),
            (AnswerChoice::WrongType, Ask::Confirm) => json!("yes"),
        }
    }

    /// Whether the answer fits what `ask` asks: an answer that fits is taken, any other is
    /// refused and changes nothing.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::{AnswerChoice, Ask};
    /// assert!(!AnswerChoice::NotAnOption.fits(Ask::Select));
    /// assert!(AnswerChoice::NotAnOption.fits(Ask::FreeText), "any text answers it");
    /// assert!(!AnswerChoice::WrongType.fits(Ask::FreeText));
    /// ```
    pub fn fits(self, ask: Ask) -> bool {
        match self {
            AnswerChoice::Fits => true,
            AnswerChoice::NotAnOption => ask == Ask::FreeText,
            AnswerChoice::WrongType => false,
        }
    }
}

/// The kit's own suspending tool, [`CONFIRM_TOOL`]: a tool of a harness builder's kind (not
/// built in) that asks the user to confirm a deploy target. It suspends every call with the
/// payload `{"target": "staging"}` and an answer schema that is an object (`confirm`, a
/// boolean, required; nothing else), and its `resume` step turns the answer into its result.
/// Register it and list it in a mode's `availableTools` to have the kit drive it
/// ([`Ask::Confirm`]).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::ToolRegistry;
/// use agent_controller::testing::{CONFIRM_TOOL, ConfirmTool};
/// let mut tools = ToolRegistry::with_workspace_tools();
/// tools.register(Arc::new(ConfirmTool))?;
/// assert!(tools.knows(CONFIRM_TOOL));
/// # Ok::<(), agent_controller::tool::ToolError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfirmTool;

#[async_trait]
impl Tool for ConfirmTool {
    fn name(&self) -> &str {
        CONFIRM_TOOL
    }

    fn description(&self) -> String {
        "Asks the user to confirm the deploy target, and waits for the answer.".to_owned()
    }

    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }

    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        ToolOutput::suspend(
            format!("Deploy to {CONFIRM_TARGET}? The user has to confirm it."),
            json!({ "target": CONFIRM_TARGET }),
            json!({
                "type": "object",
                "properties": { "confirm": { "type": "boolean" } },
                "required": ["confirm"],
                "additionalProperties": false,
            }),
        )
    }

    async fn resume(&self, _args: &Value, answer: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        match answer["confirm"].as_bool() {
            Some(true) => ToolOutput::ok(format!("Deployed to {CONFIRM_TARGET}.")),
            _ => ToolOutput::error(format!(
                "The user did not confirm the deploy to {CONFIRM_TARGET}."
            )),
        }
    }
}
