//! The built-in `subagent` tool: starts a child run of a configured subagent type
//! ([`crate::subagent`]) with a task, and hands its final text back as the call's result.
//!
//! The session runs the child itself (a child needs the parent's mode, rules and model); run
//! outside a session, the tool returns an error result. Input: `agentType` (a type the current
//! mode may start), `task` (text that shows something, at most [`MAX_TASK_CHARS`] characters) and an
//! optional `description` (a few words the user sees).
//!
//! # Examples
//! ```
//! use agent_controller::Tool;
//! use agent_controller::tool::ToolAccess;
//! use agent_controller::tool::subagent::Subagent;
//! assert_eq!(Subagent.name(), "subagent");
//! assert_eq!(Subagent.input_schema()["required"], serde_json::json!(["agentType", "task"]));
//! ```

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolAccess, ToolContext};
use crate::exchange::ToolOutput;
pub use crate::subagent::{MAX_DESCRIPTION_CHARS, MAX_TASK_CHARS, SUBAGENT};

/// `subagent`: starts a child run of a subagent type with a task.
#[derive(Debug, Clone, Copy, Default)]
pub struct Subagent;

/// What the model reads about the tool in a mode that may start `types` (each type's id and
/// description).
pub(crate) fn description(types: &[(&str, &str)]) -> String {
    let mut text = String::from(
        "Start a subagent: a helper with its own conversation that works on one task with the \
         tools its type allows (never more than yours) and reports back. Its final answer is \
         this call's result. Give it a complete, self-contained task: it sees nothing of this \
         conversation. Several calls in one reply run at the same time.",
    );
    if types.is_empty() {
        text.push_str(" No subagent type may be started here.");
    } else {
        text.push_str(" Types (agentType):");
        for (id, description) in types {
            text.push_str(&format!("\n- `{id}`"));
            if !description.is_empty() {
                text.push_str(": ");
                text.push_str(description);
            }
        }
    }
    text
}

/// The input schema in a mode that may start `types` (named in `agentType`'s description).
pub(crate) fn input_schema(types: &[(&str, &str)]) -> Value {
    // The ids are named, not enumerated: a call naming another type gets the session's
    // error, which lists the types this mode may start.
    let ids: Vec<String> = types.iter().map(|(id, _)| format!("`{id}`")).collect();
    let agent_type = json!({
        "type": "string",
        "description": if ids.is_empty() {
            "The subagent type to start (none may be started here).".to_owned()
        } else {
            format!("The subagent type to start: one of {}.", ids.join(", "))
        },
    });
    json!({
        "type": "object",
        "properties": {
            "agentType": agent_type,
            "task": {
                "type": "string",
                "description": format!("The task, complete and self-contained: at most {MAX_TASK_CHARS} characters."),
            },
            "description": {
                "type": "string",
                "description": format!("A few words on the task, shown to the user: at most {MAX_DESCRIPTION_CHARS} characters."),
            },
        },
        "required": ["agentType", "task"],
        "additionalProperties": false,
    })
}

#[async_trait]
impl Tool for Subagent {
    fn name(&self) -> &str {
        SUBAGENT
    }

    fn description(&self) -> String {
        description(&[])
    }

    fn input_schema(&self) -> Value {
        input_schema(&[])
    }

    /// Changes nothing of its own: what its child changes is ruled in the child, by the
    /// parent's mode (a child of a planning mode is read-only).
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        ToolOutput::error(
            "subagent starts a child run of the session; run outside a session, there is none: nothing was started.",
        )
    }
}

/// A `subagent` call's input, checked: the type id, the task and the description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubagentInput {
    pub(crate) agent_type: String,
    pub(crate) task: String,
    pub(crate) description: Option<String>,
}

/// Reads a `subagent` call's arguments.
///
/// # Errors
/// Why they are refused, for the model: a missing or blank `agentType` or `task` (one that
/// shows nothing: [`crate::display::is_blank`]), a task or
/// description too long, a value of the wrong type.
pub(crate) fn input(args: &Value) -> Result<SubagentInput, String> {
    let text = |key: &str| match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    };
    let agent_type = text("agentType")?.unwrap_or_default();
    if crate::display::is_blank(&agent_type) {
        return Err("`agentType` is missing: name the subagent type to start".to_owned());
    }
    let task = text("task")?.unwrap_or_default();
    // Blank is what shows nothing: white space, and characters such as a zero-width space.
    if crate::display::is_blank(&task) {
        return Err(
            "`task` is empty (it shows nothing): say what the subagent should do".to_owned(),
        );
    }
    let chars = task.chars().count();
    if chars > MAX_TASK_CHARS {
        return Err(format!(
            "`task` has {chars} characters, more than the {MAX_TASK_CHARS} a subagent's task may have: give a shorter task (point to files instead of pasting them)"
        ));
    }
    let description = text("description")?;
    if let Some(d) = &description
        && d.chars().count() > MAX_DESCRIPTION_CHARS
    {
        return Err(format!(
            "`description` is longer than {MAX_DESCRIPTION_CHARS} characters: a few words will do"
        ));
    }
    Ok(SubagentInput {
        agent_type,
        task,
        description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_task_an_oversized_task_and_a_missing_type_are_refused() {
        assert!(input(&json!({"agentType": "explore", "task": "  "})).is_err());
        // Trial F13: a task of white space and characters that show nothing is blank too.
        for blank in ["\u{200b}\u{200b}", " \u{3164}\t\u{feff} ", "\u{2800}\n"] {
            let why = input(&json!({"agentType": "explore", "task": blank})).expect_err(blank);
            assert!(why.contains("`task` is empty"), "{why}");
        }
        assert!(input(&json!({"agentType": "\u{200b}", "task": "look"})).is_err());
        let huge = "x".repeat(MAX_TASK_CHARS + 1);
        let error = input(&json!({"agentType": "explore", "task": huge})).expect_err("too long");
        assert!(error.contains("more than"), "{error}");
        assert!(input(&json!({"task": "look"})).is_err());
        assert!(input(&json!({"agentType": "explore", "task": 5})).is_err());
        let ok = input(&json!({"agentType": "explore", "task": "look"})).expect("valid");
        assert_eq!(ok.task, "look");
    }
}
