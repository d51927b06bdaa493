//! How a call its tool suspended (a question of `ask_user`, or another tool's suspension) is
//! asked over ACP (issue 37), by one rule:
//!
//! - a client that advertises elicitation forms (`clientCapabilities.elicitation.form`) gets an
//!   `elicitation/create` form, when the answer's schema fits one: a flat form (an object of
//!   strings, numbers, integers, booleans and multi-selects of strings), or one such value,
//!   asked as the form's one field `answer`;
//! - otherwise a choice (an answer schema that is a string `enum`, or an array of them) is a
//!   `session/request_permission` with one option per choice and "Don't answer" (an array
//!   takes one pick: a client without elicitation picks one option of a multi-select question);
//! - anything else (free text, a nested schema) ends the turn, telling the client that the next
//!   prompt is the answer ([`ToolSuspendPayload::answer_from_text`]).
//!
//! The question, its options and any payload come from the model: shown whole, every
//! character visible ([`as_code`], [`neutralize_line`]). The answer a client gives is checked
//! by the library ([`ToolSuspendPayload::answer_mismatch`]) before it is taken.

use std::collections::BTreeMap;

use agent_client_protocol::v1::schema::{
    Content, CreateElicitationRequest, CreateElicitationResponse, ElicitationAction,
    ElicitationFormMode, ElicitationPropertySchema, ElicitationSchema, ElicitationSessionScope,
    PermissionOption, PermissionOptionKind, SessionId, ToolCallContent, ToolCallId, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::{Map, Value, json};

use crate::acp::permission::{Answer, Offer, REJECT, Verdict, as_code, meta};
use crate::display::{neutralize, neutralize_line};
use crate::event::{SuspensionKind, ToolSuspendPayload};
use crate::session::{PendingDecision, PendingSuspension};

/// The name of the form's one field when the answer is one value, not an object.
const FIELD: &str = "answer";

/// The id prefix of a choice's permission option: `answer:N`, N its place in the choices.
const ANSWER_PREFIX: &str = "answer:";

/// The text of the option that answers nothing.
pub(crate) const DONT_ANSWER: &str = "Don't answer";

/// How a suspension is asked.
#[derive(Debug)]
pub(crate) enum Way {
    /// An `elicitation/create` form.
    Form(Form),
    /// A `session/request_permission` with one option per choice.
    Choices(Offer),
    /// The next prompt is the answer: the turn ends, the client told so.
    NextPrompt,
}

/// The form of an elicitation, and how its content becomes the answer.
#[derive(Debug)]
pub(crate) struct Form {
    schema: ElicitationSchema,
    /// The answer is the form's field `answer` (else the whole content, an object).
    wrapped: bool,
}

/// How `payload` is asked of a client that advertises elicitation forms (`elicits`) or not.
pub(crate) fn way(payload: &ToolSuspendPayload, elicits: bool) -> Way {
    if elicits && let Some(form) = form(payload) {
        return Way::Form(form);
    }
    match choices(payload) {
        Some(offer) => Way::Choices(offer),
        None => Way::NextPrompt,
    }
}

/// A choice: its label, and its description when it has one.
type Choice = (String, Option<String>);

/// The labels an answer picks among, with their descriptions (a question's options), and
/// whether the answer is an array of them: `None` unless the schema is a string `enum` or an
/// array of one.
fn choice_values(payload: &ToolSuspendPayload) -> Option<(Vec<Choice>, bool)> {
    let schema = &payload.answer_schema;
    let (values, many) = match schema.get("type").and_then(Value::as_str) {
        Some("string") => (schema.get("enum")?, false),
        Some("array") => {
            let items = schema.get("items")?;
            if items.get("type").and_then(Value::as_str) != Some("string") {
                return None;
            }
            (items.get("enum")?, true)
        }
        _ => return None,
    };
    let described = |label: &str| -> Option<String> {
        if payload.kind != SuspensionKind::Question {
            return None;
        }
        let options = payload.payload.get("options")?.as_array()?;
        let option = options.iter().find(|o| o["label"] == label)?;
        option
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let labels = values
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(|label| (label.to_owned(), described(label))))
        .collect::<Option<Vec<_>>>()?;
    (!labels.is_empty()).then_some((labels, many))
}

/// A choice as permission options: one `allow_once` option per label (its answer: the label,
/// or a one-label array), then `reject_once` "Don't answer".
fn choices(payload: &ToolSuspendPayload) -> Option<Offer> {
    let (labels, many) = choice_values(payload)?;
    let mut options: Vec<(PermissionOption, Verdict)> = labels
        .into_iter()
        .enumerate()
        .map(|(at, (label, _))| {
            let option = PermissionOption::new(
                format!("{ANSWER_PREFIX}{at}"),
                neutralize_line(&label).into_owned(),
                PermissionOptionKind::AllowOnce,
            );
            let answer = if many {
                json!([label])
            } else {
                Value::String(label)
            };
            (option, Verdict::Answer(answer))
        })
        .collect();
    options.push((
        PermissionOption::new(REJECT, DONT_ANSWER, PermissionOptionKind::RejectOnce),
        Verdict::Reject,
    ));
    Some(Offer {
        options,
        plan: None,
    })
}

/// The form `payload`'s answer takes, when elicitation can ask it: a flat object, or one
/// value as the field `answer`.
fn form(payload: &ToolSuspendPayload) -> Option<Form> {
    let schema = &payload.answer_schema;
    let descriptions: BTreeMap<String, String> = choice_values(payload)
        .map(|(labels, _)| {
            labels
                .into_iter()
                .filter_map(|(l, d)| d.map(|d| (l, d)))
                .collect()
        })
        .unwrap_or_default();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        let field = property(schema, &descriptions)?;
        let form = ElicitationSchema::new().property(FIELD, field, true);
        return Some(Form {
            schema: form,
            wrapped: true,
        });
    }
    let object = schema.as_object()?;
    const OBJECT_KEYS: &[&str] = &[
        "type",
        "properties",
        "required",
        "additionalProperties",
        "title",
        "description",
        "$schema",
    ];
    if object.keys().any(|k| !OBJECT_KEYS.contains(&k.as_str())) {
        return None;
    }
    if !matches!(
        object.get("additionalProperties"),
        None | Some(Value::Bool(false))
    ) {
        return None;
    }
    let required: Vec<&str> = match object.get("required") {
        None => Vec::new(),
        Some(list) => list
            .as_array()?
            .iter()
            .map(Value::as_str)
            .collect::<Option<_>>()?,
    };
    let properties = match object.get("properties") {
        None => return None,
        Some(p) => p.as_object()?,
    };
    if properties.is_empty() || required.iter().any(|r| !properties.contains_key(*r)) {
        return None;
    }
    let mut form = ElicitationSchema::new();
    for (name, field) in properties {
        let field = property(field, &BTreeMap::new())?;
        form = form.property(name.clone(), field, required.contains(&name.as_str()));
    }
    Some(Form {
        schema: form,
        wrapped: false,
    })
}

/// One field of a form: a string (its `enum` as titled choices, each label shown with every
/// character visible and described by `descriptions`), a number, an integer, a boolean, or an
/// array of string choices; `None` for anything else, or for a keyword elicitation cannot ask.
fn property(
    schema: &Value,
    descriptions: &BTreeMap<String, String>,
) -> Option<ElicitationPropertySchema> {
    let object = schema.as_object()?;
    let kind = object.get("type")?.as_str()?;
    let keys: &[&str] = match kind {
        "string" => &[
            "type",
            "title",
            "description",
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "default",
            "enum",
        ],
        "number" | "integer" => &[
            "type",
            "title",
            "description",
            "minimum",
            "maximum",
            "default",
        ],
        "boolean" => &["type", "title", "description", "default"],
        "array" => &[
            "type",
            "title",
            "description",
            "minItems",
            "maxItems",
            "items",
            "uniqueItems",
        ],
        _ => return None,
    };
    if object.keys().any(|k| !keys.contains(&k.as_str())) {
        return None;
    }
    let mut field = Map::new();
    for (key, value) in object {
        let value = match key.as_str() {
            "title" => Value::String(neutralize_line(value.as_str()?).into_owned()),
            "description" => Value::String(neutralize(value.as_str()?).into_owned()),
            "format" => {
                let known = ["email", "uri", "date", "date-time"];
                if !known.contains(&value.as_str()?) {
                    return None;
                }
                value.clone()
            }
            "enum" => {
                field.insert("oneOf".to_owned(), titled(value, descriptions)?);
                continue;
            }
            "items" => {
                let items = value.as_object()?;
                if items.len() != 2 || items.get("type")?.as_str()? != "string" {
                    return None;
                }
                json!({ "anyOf": titled(items.get("enum")?, descriptions)? })
            }
            // Every item is a different choice already.
            "uniqueItems" => continue,
            _ => value.clone(),
        };
        field.insert(key.clone(), value);
    }
    match serde_json::from_value(Value::Object(field)).ok()? {
        ElicitationPropertySchema::Other(_) => None,
        field => Some(field),
    }
}

/// String choices as titled ones: `const` the value, `title` it shown with every character
/// visible, with its description if it has one.
fn titled(values: &Value, descriptions: &BTreeMap<String, String>) -> Option<Value> {
    let options = values
        .as_array()?
        .iter()
        .map(|v| {
            let label = v.as_str()?;
            let mut option = json!({ "const": label, "title": neutralize_line(label) });
            if let Some(description) = descriptions.get(label) {
                option["description"] = Value::String(neutralize(description).into_owned());
            }
            Some(option)
        })
        .collect::<Option<Vec<_>>>()?;
    (!options.is_empty()).then_some(Value::Array(options))
}

impl Form {
    /// The `elicitation/create` request of session `session_id`, tied to its tool call
    /// `tool_call_id`, its message what [`shown`] shows.
    pub(crate) fn request(
        &self,
        session_id: SessionId,
        tool_call_id: String,
        payload: &ToolSuspendPayload,
    ) -> CreateElicitationRequest {
        let scope =
            ElicitationSessionScope::new(session_id).tool_call_id(ToolCallId::new(tool_call_id));
        let mode = ElicitationFormMode::new(scope, self.schema.clone());
        CreateElicitationRequest::new(mode, shown(payload)).meta(meta(json!({
            "decisionId": payload.decision_id,
            "payloadSha256": payload.payload_sha256,
            "toolName": payload.tool_name,
            "kind": payload.kind,
        })))
    }

    /// What the client's response decides: the content it accepted, as the answer, when it
    /// fits the answer's schema; a decline answers nothing (a rejection: the tool is told the
    /// user declined); a cancel is the `cancelled` outcome; content that does not fit is
    /// [`Answer::Unfit`], saying why; anything else (an error, no response) decides nothing.
    pub(crate) fn answer(
        &self,
        payload: &ToolSuspendPayload,
        response: Result<CreateElicitationResponse, agent_client_protocol::Error>,
    ) -> Answer {
        let action = match response {
            Ok(response) => response.action,
            Err(error) => {
                tracing::debug!(%error, "the elicitation was not answered");
                return Answer::Undecided;
            }
        };
        match action {
            ElicitationAction::Accept(accepted) => {
                let content = accepted.content.unwrap_or_default();
                let Ok(Value::Object(content)) = serde_json::to_value(content) else {
                    return Answer::Unfit("the form's content is not an object".to_owned());
                };
                let answer = if self.wrapped {
                    content.get(FIELD).cloned()
                } else {
                    Some(Value::Object(content))
                };
                let Some(answer) = answer else {
                    return Answer::Unfit(format!("the form's field `{FIELD}` is missing"));
                };
                match payload.answer_mismatch(&answer) {
                    None => Answer::Selected(Verdict::Answer(answer)),
                    Some(why) => {
                        tracing::info!(%why, "an elicited answer that does not fit is not taken");
                        Answer::Unfit(neutralize_line(&why.to_string()).into_owned())
                    }
                }
            }
            ElicitationAction::Decline => Answer::Selected(Verdict::Reject),
            ElicitationAction::Cancel => Answer::Cancelled,
            _ => Answer::Undecided,
        }
    }
}

/// What a suspension shows, every character visible, in a fenced code block: a question and
/// its options (numbered, each with its description); another tool's name, its payload and
/// the schema of the answer it takes.
pub(crate) fn shown(payload: &ToolSuspendPayload) -> String {
    let question = payload.payload.get("question").and_then(Value::as_str);
    match (payload.kind, question) {
        (SuspensionKind::Question, Some(question)) => {
            let mut text = question.to_owned();
            let options = payload.payload.get("options").and_then(Value::as_array);
            for (at, option) in options.into_iter().flatten().enumerate() {
                let label = option["label"].as_str().unwrap_or_default();
                text.push_str(&format!("\n{}. {label}", at + 1));
                if let Some(description) = option["description"].as_str() {
                    text.push_str(&format!(": {description}"));
                }
            }
            if payload.payload.get("selectionMode").and_then(Value::as_str) == Some("multi_select")
            {
                text.push_str("\n(several may be chosen)");
            }
            as_code(&text)
        }
        _ => {
            let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
            format!(
                "`{}` waits for your answer:\n{}\nIts answer fits this JSON Schema:\n{}",
                neutralize_line(&payload.tool_name),
                as_code(&pretty(&payload.payload)),
                as_code(&pretty(&payload.answer_schema)),
            )
        }
    }
}

/// The `toolCall` of a choice's permission request: what [`shown`] shows (no `rawInput`: the
/// payload's characters would be there unescaped), and the decision's id, the payload's sha256
/// and the tool in `_meta`.
pub(crate) fn choice_tool_call(
    tool_call_id: String,
    payload: &ToolSuspendPayload,
) -> ToolCallUpdate {
    let title = match payload.kind {
        SuspensionKind::Question => "A question for you".to_owned(),
        _ => format!(
            "{} waits for your answer",
            neutralize_line(&payload.tool_name)
        ),
    };
    let fields = ToolCallUpdateFields::new()
        .kind(ToolKind::Other)
        .status(ToolCallStatus::Pending)
        .title(title)
        .content(vec![ToolCallContent::Content(Content::new(shown(payload)))]);
    let mut fields_meta = json!({
        "decisionId": payload.decision_id,
        "payloadSha256": payload.payload_sha256,
        "toolName": payload.tool_name,
        "kind": payload.kind,
    });
    if let Some(subagent) = &payload.subagent {
        fields_meta["subagent"] = json!(subagent);
    }
    ToolCallUpdate::new(tool_call_id, fields).meta(meta(fields_meta))
}

/// The question the next prompt answers when its text fits: the first call waiting for an
/// answer among `session`'s pending decisions. One rule for the turn that takes the prompt as
/// the answer and for the replay of `session/load` that shows the question first.
pub(crate) fn answered_by_prompt(session: &crate::Session) -> Option<&PendingSuspension> {
    session
        .pending()
        .iter()
        .filter(|p| p.is_waiting())
        .find_map(PendingDecision::as_suspension)
}

/// What the client is told when the next prompt is the answer: what waits, and that the next
/// prompt answers it (JSON that fits, for an answer that is no text); a prompt that does not
/// fit is taken as a new message, and the tool is told the user did not answer.
pub(crate) fn next_prompt_text(payload: &ToolSuspendPayload) -> String {
    let takes_text = payload
        .answer_mismatch(&Value::String(String::new()))
        .is_none()
        || payload
            .answer_mismatch(&Value::String("x".to_owned()))
            .is_none();
    let how = if takes_text {
        "Your next prompt is the answer.".to_owned()
    } else {
        "Your next prompt is the answer: JSON that fits the schema above. A prompt that does \
         not fit is taken as a new message, and the tool is told you did not answer."
            .to_owned()
    };
    format!("\n\n{}\n\n{how}\n", shown(payload))
}
