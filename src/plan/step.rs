//! One numbered step of a plan as the approver is shown it ([`PlanStep`]): its number in the
//! plan, which `--steps`, the decision's `steps` and ACP's `_meta.steps` name, and its text.

use serde::{Deserialize, Deserializer, Serialize};

/// A numbered step of a plan (`3. Add the tests.`): the plan's own number and the step's text,
/// as the suspend payload's `steps` lists them (`{"number": 3, "text": "Add the tests."}`).
/// Approving some steps names them by `number` ([`crate::Decision::steps`]).
///
/// # Examples
/// ```
/// use agent_controller::event::PlanStep;
/// let step = PlanStep::new(3, "Add the tests.");
/// assert_eq!(serde_json::to_value(&step)?, serde_json::json!({ "number": 3, "text": "Add the tests." }));
/// assert_eq!(step.to_string(), "3. Add the tests.");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlanStep {
    /// The step's number as the plan writes it (a plan may skip or start past 1).
    pub number: u64,
    /// What the step says, as the task list holds it (cut past its limit).
    pub text: String,
}

impl PlanStep {
    /// Step `number` saying `text`.
    pub fn new(number: u64, text: impl Into<String>) -> Self {
        Self {
            number,
            text: text.into(),
        }
    }
}

/// `N. text`, as the plan writes it.
impl std::fmt::Display for PlanStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}. {}", self.number, self.text)
    }
}

/// Reads a list of steps, each `{number, text}`; a bare string (as records written before the
/// steps carried their numbers hold them) is the step numbered by its place, from 1.
pub(crate) fn deserialize_steps<'de, D>(deserializer: D) -> Result<Vec<PlanStep>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Listed {
        Step(PlanStep),
        Text(String),
    }
    let listed = Vec::<Listed>::deserialize(deserializer)?;
    Ok(listed
        .into_iter()
        .zip(1u64..)
        .map(|(step, place)| match step {
            Listed::Step(step) => step,
            Listed::Text(text) => PlanStep::new(place, text),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        #[serde(deserialize_with = "deserialize_steps")]
        steps: Vec<PlanStep>,
    }

    #[test]
    fn steps_read_with_their_numbers_and_older_texts_by_their_place() {
        let read: Holder = serde_json::from_value(serde_json::json!({
            "steps": [{ "number": 2, "text": "b" }, { "number": 5, "text": "e" }]
        }))
        .expect("numbered");
        assert_eq!(read.steps, [PlanStep::new(2, "b"), PlanStep::new(5, "e")]);
        let older: Holder =
            serde_json::from_value(serde_json::json!({ "steps": ["a", "b"] })).expect("texts");
        assert_eq!(older.steps, [PlanStep::new(1, "a"), PlanStep::new(2, "b")]);
        assert!(
            serde_json::from_value::<Holder>(
                serde_json::json!({ "steps": [{ "number": -1, "text": "x" }] })
            )
            .is_err()
        );
    }
}
