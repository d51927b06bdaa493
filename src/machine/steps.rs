//! Approving some of a plan's steps ([`crate::Decision::steps`]): the list a person types
//! (`1-3,5`, [`parse`]), checked against the plan's numbered steps ([`choose`]), and what the
//! next mode gets of it: the plan with the other steps marked as not approved
//! ([`StepChoice::mark`]) and a line that names both ([`StepChoice::told`]). Pure: no I/O.

use std::collections::BTreeSet;

use super::tasks::{numbers_listed, plan_steps, step_text};
use crate::exchange::tasks::MAX_TASKS;
use crate::plan::markdown::lines_outside_code;

/// What marks a step the approval left out, in the text the next mode gets: put before the
/// step's text, after its number (`4. (NOT APPROVED: do not carry out this step) Remove …`).
pub(crate) const NOT_APPROVED_MARK: &str = "(NOT APPROVED: do not carry out this step)";

/// The most digits a step number has ([`step_text`] reads no more).
const MAX_DIGITS: usize = 9;

/// The step numbers `text` lists: numbers and ranges (`1-3`) separated by commas, spaces
/// around each part ignored, in the order given (a range ascending).
///
/// # Errors
/// A message naming the part, for an empty list or part, anything but digits and one `-`, 0,
/// more than nine digits, a range backwards, and more than [`MAX_TASKS`] numbers in all.
pub(crate) fn parse(text: &str) -> Result<Vec<u64>, String> {
    if text.trim().is_empty() {
        return Err("no step numbers given: name the steps to approve, as `1-3,5`".to_owned());
    }
    let mut numbers = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a.trim(), part)?, number(b.trim(), part)?),
            None => {
                let n = number(part, part)?;
                (n, n)
            }
        };
        if last < first {
            return Err(format!(
                "the range `{part}` runs backwards: write it `{last}-{first}`"
            ));
        }
        // Bounded before it is expanded: a range of a billion steps is refused, not made.
        if last - first >= (MAX_TASKS - numbers.len().min(MAX_TASKS)) as u64 {
            return Err(format!(
                "more than {MAX_TASKS} steps named: a plan's task list holds at most {MAX_TASKS}"
            ));
        }
        numbers.extend(first..=last);
    }
    Ok(numbers)
}

/// The step number `text` (a part of `part`), from 1, of at most [`MAX_DIGITS`] digits.
fn number(text: &str, part: &str) -> Result<u64, String> {
    let shown = || crate::display::neutralize_line_within(part, 40);
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{}` is not a step number or a range of them (as `1-3,5`)",
            shown()
        ));
    }
    if text.len() > MAX_DIGITS {
        return Err(format!("`{}` is past any step a plan numbers", shown()));
    }
    match text.parse::<u64>() {
        Ok(0) => Err("step 0 does not exist: a plan numbers its steps from 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{}` is not a step number", shown())),
    }
}

/// The plan's steps an approval approves and those it leaves out ([`choose`]), each by the
/// plan's own number, in the plan's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepChoice {
    /// The steps approved.
    pub(crate) approved: Vec<u64>,
    /// The plan's other steps (those past the task list's [`MAX_TASKS`] included).
    pub(crate) not_approved: Vec<u64>,
}

/// Checks that `chosen` names steps of `plan` (its text as shown): each number names exactly
/// one of the steps the plan numbers (among the first [`MAX_TASKS`], the ones a task list
/// holds), once. Returns what is approved and what is not.
///
/// # Errors
/// A message for an empty list, more than [`MAX_TASKS`] numbers, a number named twice, a
/// number the plan gives no step or more than one, and a plan without numbered steps.
pub(crate) fn choose(plan: &str, chosen: &[u64]) -> Result<StepChoice, String> {
    if chosen.is_empty() {
        return Err(
            "the list of steps is empty: name at least one, or approve the whole plan".to_owned(),
        );
    }
    if chosen.len() > MAX_TASKS {
        return Err(format!(
            "{} steps named: a plan's task list holds at most {MAX_TASKS}",
            chosen.len()
        ));
    }
    let listed = plan_steps(plan).numbers;
    if listed.is_empty() {
        return Err("the plan has no numbered steps: approve it whole, or reject it".to_owned());
    }
    let every: Vec<u64> = lines_outside_code(plan)
        .filter_map(step_text)
        .map(|(n, _)| n)
        .collect();
    let mut seen = BTreeSet::new();
    for &n in chosen {
        if !seen.insert(n) {
            return Err(format!("step {n} is named twice"));
        }
        match every.iter().filter(|&&m| m == n).count() {
            0 => {
                return Err(format!(
                    "the plan has no step {n} (its steps: {})",
                    numbers_listed(&distinct(&listed))
                ));
            }
            1 if listed.contains(&n) => {}
            1 => {
                return Err(format!(
                    "step {n} is past the first {MAX_TASKS} steps, the ones a task list holds: approve the whole plan"
                ));
            }
            count => {
                return Err(format!(
                    "the plan numbers {count} steps {n} (a nested or second list): approve the whole plan, or edit it to number each step once"
                ));
            }
        }
    }
    let approved: Vec<u64> = listed
        .iter()
        .copied()
        .filter(|n| seen.contains(n))
        .collect();
    let not_approved = distinct(&every)
        .into_iter()
        .filter(|n| !seen.contains(n))
        .collect();
    Ok(StepChoice {
        approved,
        not_approved,
    })
}

impl StepChoice {
    /// Whether some step is left out (an approval of all of them is one of the whole plan).
    pub(crate) fn is_partial(&self) -> bool {
        !self.not_approved.is_empty()
    }

    /// The line the next mode reads before the plan: `Approved steps: 1, 2, 3, 5; not
    /// approved: 4.`, and how the others are marked.
    pub(crate) fn told(&self) -> String {
        format!(
            "Approved steps: {}; not approved: {}. The user approved only these steps: each step \
             not approved is marked `{NOT_APPROVED_MARK}` in the plan below; do not carry it out.",
            numbers_listed(&self.approved),
            numbers_listed(&self.not_approved)
        )
    }

    /// `plan` with every step not approved marked: [`NOT_APPROVED_MARK`] put before its text,
    /// after its number; every other byte as it was.
    pub(crate) fn mark(&self, plan: &str) -> String {
        let base = plan.as_ptr() as usize;
        let mut marks = Vec::new();
        for line in lines_outside_code(plan) {
            if let Some((n, content)) = step_text(line)
                && !self.approved.contains(&n)
            {
                // `content` is a slice of `plan`: where it starts is where the mark goes.
                marks.push(content.as_ptr() as usize - base);
            }
        }
        let mut text =
            String::with_capacity(plan.len() + marks.len() * (NOT_APPROVED_MARK.len() + 1));
        let mut from = 0;
        for at in marks {
            text.push_str(&plan[from..at]);
            text.push_str(NOT_APPROVED_MARK);
            text.push(' ');
            from = at;
        }
        text.push_str(&plan[from..]);
        text
    }
}

/// `numbers` without repeats, in order.
fn distinct(numbers: &[u64]) -> Vec<u64> {
    let mut seen = BTreeSet::new();
    numbers
        .iter()
        .copied()
        .filter(|n| seen.insert(*n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "1. One\n2. Two\n```\n3. in code\n```\n3. Three\n4. Four\n5. Five\n";

    #[test]
    fn a_typed_list_reads_numbers_and_ranges_and_refuses_the_rest() {
        assert_eq!(parse("1-3,5"), Ok(vec![1, 2, 3, 5]));
        assert_eq!(parse(" 2 , 4 - 5 "), Ok(vec![2, 4, 5]));
        assert_eq!(parse("7"), Ok(vec![7]));
        for (bad, says) in [
            ("", "no step numbers"),
            ("1,,2", "not a step number"),
            ("3-1", "backwards"),
            ("0", "step 0"),
            ("1-0", "step 0"),
            ("5-3", "backwards"),
            ("x", "not a step number"),
            ("1-", "not a step number"),
            ("-2", "not a step number"),
            ("1-2-3", "not a step number"),
            ("+1", "not a step number"),
            ("１", "not a step number"),
            ("99999999999999999999", "past any step"),
            ("1-999999999", "more than 200"),
            ("1-150,151-250", "more than 200"),
        ] {
            let why = parse(bad).expect_err(bad);
            assert!(why.contains(says), "{bad}: {why}");
        }
        assert_eq!(parse("1-200").map(|v| v.len()), Ok(200));
    }

    #[test]
    fn a_choice_names_steps_of_the_plan_once_each() {
        let choice = choose(PLAN, &[5, 1, 2, 3]).expect("choice");
        assert_eq!(choice.approved, [1, 2, 3, 5]);
        assert_eq!(choice.not_approved, [4]);
        assert!(choice.is_partial());
        assert!(
            choice
                .told()
                .starts_with("Approved steps: 1, 2, 3, 5; not approved: 4.")
        );
        for (chosen, says) in [
            (&[][..], "empty"),
            (&[6][..], "no step 6 (its steps: 1, 2, 3, 4, 5)"),
            (&[0][..], "no step 0"),
            (&[2, 2][..], "step 2 is named twice"),
            (&[u64::MAX][..], "no step"),
        ] {
            let why = choose(PLAN, chosen).expect_err("refused");
            assert!(why.contains(says), "{chosen:?}: {why}");
        }
        let nested = "1. One\n   1. Sub\n2. Two\n";
        assert!(
            choose(nested, &[1])
                .expect_err("two")
                .contains("numbers 2 steps 1")
        );
        assert_eq!(choose(nested, &[2]).expect("one").not_approved, [1]);
        assert!(
            choose("no steps", &[1])
                .expect_err("none")
                .contains("no numbered steps")
        );
        assert!(!choose(PLAN, &[1, 2, 3, 4, 5]).expect("all").is_partial());
    }

    #[test]
    fn the_steps_not_approved_are_marked_and_nothing_else_changes() {
        let choice = choose(PLAN, &[1, 2, 3, 5]).expect("choice");
        let marked = choice.mark(PLAN);
        assert_eq!(
            marked,
            format!(
                "1. One\n2. Two\n```\n3. in code\n```\n3. Three\n4. {NOT_APPROVED_MARK} Four\n5. Five\n"
            )
        );
        let indented = "Intro\n  2)\tTwo\r\n1. One";
        let marked = choose(indented, &[1]).expect("choice").mark(indented);
        assert_eq!(
            marked,
            format!("Intro\n  2)\t{NOT_APPROVED_MARK} Two\r\n1. One")
        );
    }
}
