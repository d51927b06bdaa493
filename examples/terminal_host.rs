//! A terminal host: the user types a task, the model plans in `plan` mode, the host shows the
//! plan as submitted and asks. `y` approves (pinned to the plan's sha256, so a plan that changed
//! since it was shown is refused), `r TEXT` rejects with feedback (the model revises and the
//! host asks again), anything else, or the end of input, dismisses the prompt: the plan counts as
//! not approved and the mode stays `plan`.
//!
//!     echo y | cargo run --example terminal_host          # approves: ends in build mode
//!     cargo run --example terminal_host < /dev/null        # dismissed: stays in plan mode
//!     cargo run --example terminal_host -- "Add a CLI"     # your own task, then answer
//!
//! The model is the crate's `ScriptedModel` (it writes a plan for the task and, after a
//! rejection with feedback, revises it once), so the example runs without a provider. The
//! example checks what it shows: it exits non-zero if the session does not end in the mode the
//! answers call for.

use std::io::{BufRead, Write};
use std::sync::Arc;

use agent_controller::event::DecisionOutcome;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{
    AgentController, Decision, Event, RunOutcome, SessionOptions, ToolRegistry,
};

const MODES: &str = r#"
[[modes]]
id = "plan"
instructions = "Explore read-only, write a plan with write_plan, then submit it."
transitionsTo = "build"
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
instructions = "Carry out the approved plan."
"#;

/// What the user answered at the prompt.
enum Answer {
    Approve,
    Reject(String),
    Dismiss,
}

fn ask(input: &mut impl BufRead) -> std::io::Result<Answer> {
    print!("Approve? [y] yes, [r TEXT] reject with feedback, anything else dismisses: ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        println!("(end of input)");
        return Ok(Answer::Dismiss);
    }
    println!();
    let line = line.trim();
    Ok(match line.split_once(' ') {
        _ if line == "y" => Answer::Approve,
        Some(("r", feedback)) => Answer::Reject(feedback.to_owned()),
        _ => Answer::Dismiss,
    })
}

/// What a terminal shows of the events: mode changes and how runs end.
fn show(event: &Event) {
    match event {
        Event::ModeChanged {
            mode_id, reason, ..
        } => println!("-- now in mode {mode_id} ({reason})"),
        Event::AgentEnd { run_id, reason, .. } => println!("-- {run_id} ended: {reason}"),
        _ => {}
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let task = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Add dark mode".to_owned());
    let workspace = tempfile::tempdir()?;
    let graph = agent_controller::config::parse(MODES, "modes.toml")?;
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(workspace.path())
        .build()?;
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan").on_event(show))
        .await?;

    println!("> {task}");
    let mut outcome = session.send_message(task.as_str()).await?;
    let mut input = std::io::stdin().lock();
    let mut approved = false;
    // One loop over what waits: the plan, until it is approved, dismissed or the run ends.
    while let RunOutcome::Suspended { payload, .. } = &outcome {
        println!(
            "\n=== plan: {} (sha256 {}) ===\n{}",
            payload.submission.title,
            &payload.submission.sha256[..12],
            payload.submission.plan
        );
        // Pin every decision to the hash of the plan as shown.
        let pinned = |decision: Decision| decision.with_sha256(&payload.submission.sha256);
        let decision_id = payload.decision_id.clone();
        outcome = match ask(&mut input)? {
            Answer::Approve => {
                approved = true;
                session
                    .decide(&decision_id, pinned(Decision::approve()))
                    .await?
            }
            Answer::Reject(feedback) => {
                session
                    .decide(&decision_id, pinned(Decision::reject_with(feedback)))
                    .await?
            }
            Answer::Dismiss => {
                // A dismissed prompt is not an approval: abort the suspension, keep the mode.
                session.abort().await?;
                break;
            }
        };
    }
    if let RunOutcome::Completed { text, .. } = &outcome {
        println!("model: {text}");
    }

    let mode = session.mode().id();
    println!("\nsession ends in mode {mode}");
    let switches = session
        .decision_history()
        .iter()
        .filter(|d| d.outcome == Some(DecisionOutcome::Approved))
        .count();
    if approved {
        assert_eq!(mode, "build", "an approval hands over to build");
        assert_eq!(switches, 1, "exactly one approval");
        assert!(matches!(outcome, RunOutcome::Completed { .. }));
    } else {
        assert_eq!(mode, "plan", "without an approval the mode stays");
        assert!(session.pending().is_empty(), "nothing left waiting");
        assert_eq!(switches, 0);
    }
    Ok(())
}
