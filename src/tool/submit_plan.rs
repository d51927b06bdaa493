//! The built-in `submit_plan` tool ([`SubmitPlan`]): reads a plan file, captures it, and
//! suspends the run until the host approves or rejects it.
//!
//! The file is read once, at submit time ([`read_plan`]); what the user approves is exactly what
//! was captured (its SHA-256 travels with the suspension), not whatever the file holds later.
//!
//! Like `ask_user`, it is a tool a builder may take from the crate and put in a registry
//! ([`crate::ToolRegistry::register`]); the config offers it as it always does, registered or
//! not (in a mode that lists it and in a planning mode with no list, described with the mode it
//! hands over to). Inside a run the session keeps its own rule for it: the plan pends as the
//! one plan decision of the session's core, pinned to its sha256, and an approval hands over.
//! Executed outside a run (no session to suspend), it returns the readable fallback of
//! Mastra's `submitPlanTool`: a string with the plan file's path.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};

pub use crate::exchange::SUBMIT_PLAN;
use crate::exchange::ToolOutput;
use crate::jail::{self, Jail, JailError};
pub use crate::plan::{
    APPROVAL_NOTE_PREFIX, APPROVED_PLAN_BEGIN, APPROVED_PLAN_END, APPROVED_RESULT, HashMismatch,
    MAX_PLAN_BYTES, MAX_SCOPE_ENTRIES, PlanError, PlanScope, PlanScopePolicy, PlanStep,
    PlanSubmission, REJECTED_RESULT, REJECTED_WITH_FEEDBACK_PREFIX, ScopeError, approved_result,
    capture_plan, edited_approved_result, parse_plan, plan_diff, rejected_at_revision_limit,
    rejected_with_feedback, revision_diff, revision_text, sha256_hex,
};

/// The built-in plan tool (`submit_plan`) as a [`Tool`](crate::Tool) value, for a builder's
/// registry ([`crate::ToolRegistry::register`]). The controller offers `submit_plan` whether it
/// is registered or not, so registering it changes no mode's tools: a mode that lists it, or a
/// planning mode with no list, offers it; a mode that plans nothing does not, registered or not.
/// Registered twice it is refused as any tool is ([`crate::tool::ToolError::Duplicate`]); another
/// tool that takes its name is refused ([`crate::tool::ToolError::Reserved`]).
///
/// In a run the session never executes it: a call's plan is read and captured
/// ([`read_plan_protecting`]) and pends as the session's plan decision. Executed outside a run
/// ([`Tool::execute`](crate::Tool::execute) called directly, or by a host without a session),
/// nothing can wait for the user: it returns a readable fallback with the plan file's path, and
/// an error result when the call has no `path`.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use agent_controller::{Tool, ToolContext, ToolRegistry};
/// use agent_controller::tool::submit_plan::SubmitPlan;
/// use serde_json::json;
///
/// let mut tools = ToolRegistry::with_workspace_tools();
/// tools.register(Arc::new(SubmitPlan))?;
/// let dir = tempfile::tempdir()?;
/// let plans = dir.path().join(".agent/plans");
/// let ctx = ToolContext::new(dir.path(), &plans, "plan");
/// // Outside a run nothing can wait for the user: the readable fallback, with the path.
/// let tool = tools.get("submit_plan").expect("registered");
/// let output = tool.execute(&json!({ "path": ".agent/plans/dark-mode.md" }), &ctx).await;
/// assert!(!output.is_error && output.content.contains(".agent/plans/dark-mode.md"));
/// assert!(output.suspension().is_none());
/// // Its path argument leads where a run reads the plan: a bare name is in the plans directory.
/// assert_eq!(SubmitPlan.locate("path", Some("p.md"), &ctx), Some(Ok(".agent/plans/p.md".into())));
/// assert!(matches!(SubmitPlan.locate("path", Some("src/p.md"), &ctx), Some(Err(_))));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SubmitPlan;

impl SubmitPlan {
    /// Whether `tool` is the crate's `submit_plan` (and not another tool that takes its name).
    pub(crate) fn is(tool: &dyn crate::Tool) -> bool {
        (tool as &dyn std::any::Any).is::<SubmitPlan>()
    }
}

/// What `submit_plan` executed outside a run returns for the plan file at `path`.
fn fallback(path: &str) -> String {
    format!(
        "Plan submitted for the user's review: {path}. Nothing here can wait for the user's \
         decision (there is no run to suspend), so the plan is neither approved nor rejected: \
         ask the user to read the plan file."
    )
}

#[async_trait]
impl crate::Tool for SubmitPlan {
    fn name(&self) -> &str {
        SUBMIT_PLAN
    }

    /// The description without a mode: a controller offers `submit_plan` with the one that
    /// names the mode the plan hands over to ([`description`]).
    fn description(&self) -> String {
        format!(
            "Submit your plan for the user's approval. Write the plan as a markdown (.md) file \
             inside the plans directory first, then call this tool with its path. The run pauses \
             until the user decides. On approval you carry out the plan; on rejection revise it \
             using the feedback, or wait for the user's next message when there is none. {}",
            crate::plan::scope::FORMAT
        )
    }

    fn input_schema(&self) -> Value {
        input_schema()
    }

    /// It reads a plan file and changes nothing: a plan tool, as `write_plan` is.
    fn access(&self) -> crate::tool::ToolAccess {
        crate::tool::ToolAccess::Plans
    }

    /// Where the plan file lies, as a run reads it ([`read_plan`]): a bare name in the
    /// plans directory, any other path relative to the workspace and inside the plans
    /// directory; a path outside it is refused.
    fn locate(
        &self,
        arg: &str,
        path: Option<&str>,
        ctx: &crate::ToolContext<'_>,
    ) -> crate::tool::PathLocation {
        let path = path?;
        if arg != "path" {
            return Some(crate::tool::in_workspace(ctx.workspace, path));
        }
        let outside = || {
            PlanError::OutsidePlansDir(path.to_owned(), ctx.plans_dir.display().to_string())
                .to_string()
        };
        let located = jail::inside(ctx.workspace, ctx.plans_dir)
            .and_then(|plans_rel| {
                in_plans_dir(ctx.workspace, &plans_rel, path).map(|rel| plans_rel.join(rel))
            })
            .ok_or_else(outside);
        Some(located)
    }

    async fn execute(&self, args: &Value, _ctx: &crate::ToolContext<'_>) -> ToolOutput {
        match path_arg(args) {
            Ok(path) => ToolOutput::ok(fallback(path)),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// The path argument of a `submit_plan` call.
///
/// # Errors
/// [`PlanError::MissingPath`] when `args` has no string `path`.
pub fn path_arg(args: &Value) -> Result<&str, PlanError> {
    args.get("path")
        .and_then(Value::as_str)
        .ok_or(PlanError::MissingPath)
}

/// Whether `path` names a markdown file (ends in `.md`, any case).
pub fn is_markdown(path: &str) -> bool {
    Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// Reads the plan file at `path` (relative to `workspace`, or absolute under it, or a bare file
/// name in the plans directory, as `write_plan` takes it) and captures it ([`capture_plan`];
/// a bare name is recorded as the path relative to the workspace). The file must be a `.md`
/// regular file inside `plans_dir` (which lies inside `workspace`), at most
/// [`MAX_PLAN_BYTES`]; sub-folders of the plans directory are fine.
/// It is opened through a directory handle on the plans directory ([`crate::jail`]): a symlink
/// that leaves the plans directory, a FIFO or a device is refused at once.
///
/// # Errors
/// Every [`PlanError`] but `MissingPath`: not `.md`, missing, outside the plans directory, not a
/// regular file, too large, empty or blank, not UTF-8, other I/O errors.
pub fn read_plan(
    workspace: &Path,
    plans_dir: &Path,
    path: &str,
) -> Result<PlanSubmission, PlanError> {
    read_plan_protecting(workspace, plans_dir, path, &[])
}

/// [`read_plan`], refusing a plan file in one of the protected areas `protected` (files, and
/// directories with everything beneath them; see [`crate::jail::Jail::protecting`]): the
/// controller reads `submit_plan`'s file this way, so a plan cannot be a session record.
///
/// # Errors
/// As [`read_plan`]; [`PlanError::Io`] naming the protected area for a file in one.
pub fn read_plan_protecting(
    workspace: &Path,
    plans_dir: &Path,
    path: &str,
    protected: &[PathBuf],
) -> Result<PlanSubmission, PlanError> {
    if !is_markdown(path) {
        return Err(PlanError::NotMarkdown(path.to_owned()));
    }
    let shown_dir = || plans_dir.display().to_string();
    let outside = || PlanError::OutsidePlansDir(path.to_owned(), shown_dir());
    let plans_rel = jail::inside(workspace, plans_dir).ok_or_else(outside)?;
    let in_plans = in_plans_dir(workspace, &plans_rel, path).ok_or_else(outside)?;
    let from_jail = |e: JailError| match e {
        JailError::Outside(..) => outside(),
        JailError::NotFound(_) => PlanError::NotFound(path.to_owned(), shown_dir()),
        JailError::NotAFile(_) => PlanError::NotAFile(path.to_owned()),
        JailError::TooLarge { len, .. } => PlanError::TooLarge(path.to_owned(), len),
        other => PlanError::Io(path.to_owned(), other.to_string()),
    };
    let plans = Jail::open(workspace)
        .map(|ws| ws.protecting(protected))
        .and_then(|ws| ws.subdir(&plans_rel, false, &shown_dir()))
        .map_err(from_jail)?;
    let bytes = plans.read(&in_plans, MAX_PLAN_BYTES).map_err(from_jail)?;
    // A bare name is recorded where it lies, relative to the workspace as every other plan path
    // is (the pending plan files are found, and protected, by that path).
    let recorded = if is_bare_name(path) {
        plans_rel.join(&in_plans).display().to_string()
    } else {
        path.to_owned()
    };
    let submission = capture_plan(&recorded, &bytes)?;
    check_scope_links(workspace, &submission)?;
    Ok(submission)
}

/// Refuses a plan whose `## Files` section declares a path that leads out of the workspace
/// through a symlink (`docs/**` where `docs` links to `/etc`): the part of each entry before
/// its first glob part is resolved in the workspace jail. A part that does not exist yet is
/// fine (the plan may create it).
///
/// # Errors
/// [`PlanError::Scope`] naming the entry.
fn check_scope_links(workspace: &Path, submission: &PlanSubmission) -> Result<(), PlanError> {
    let Some(scope) = submission.scope() else {
        return Ok(());
    };
    let refuse = |entry: &str, why: String| {
        PlanError::Scope(
            submission.path.clone(),
            ScopeError::Entry {
                entry: entry.to_owned(),
                why,
            },
        )
    };
    let jail =
        Jail::open(workspace).map_err(|e| PlanError::Io(submission.path.clone(), e.to_string()))?;
    for (entry, literal) in scope.literal_prefixes() {
        match jail.resolve(Path::new(&literal)) {
            Ok(_) | Err(JailError::NotFound(_)) => {}
            Err(JailError::Outside(..)) => {
                return Err(refuse(
                    entry,
                    format!("leads out of the workspace through a symlink (`{literal}`)"),
                ));
            }
            Err(other) => {
                return Err(refuse(
                    entry,
                    format!("cannot be resolved in the workspace: {other}"),
                ));
            }
        }
    }
    Ok(())
}

/// Reads a plan file a host names outside the plans directory (the CLI's `--plan` and
/// `--plan-file`), checked as `submit_plan` checks a plan: a regular file (a FIFO or device is
/// refused at once, [`jail::read_file`]) of at most [`MAX_PLAN_BYTES`], UTF-8, not blank.
/// Returns its text as it is. Whether the name must end in `.md` is the caller's choice
/// ([`is_markdown`]).
///
/// # Errors
/// [`PlanError::NotAFile`], [`PlanError::TooLarge`], [`PlanError::Empty`],
/// [`PlanError::NotUtf8`]; [`PlanError::Io`] when the file does not exist or cannot be read.
///
/// # Examples
/// ```
/// use agent_controller::tool::submit_plan::{PlanError, read_plan_file};
///
/// let dir = tempfile::tempdir()?;
/// let plan = dir.path().join("edited.md");
/// std::fs::write(&plan, "# Edited\n\n1. Step\n")?;
/// assert_eq!(read_plan_file(&plan)?, "# Edited\n\n1. Step\n");
/// std::fs::write(&plan, " \n")?;
/// assert!(matches!(read_plan_file(&plan), Err(PlanError::Empty(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_plan_file(path: &Path) -> Result<String, PlanError> {
    let shown = path.display().to_string();
    let bytes = jail::read_file(path, MAX_PLAN_BYTES).map_err(|e| match e {
        JailError::TooLarge { len, .. } => PlanError::TooLarge(shown.clone(), len),
        JailError::NotAFile(_) => PlanError::NotAFile(shown.clone()),
        JailError::NotFound(_) => PlanError::Io(shown.clone(), "it does not exist".to_owned()),
        JailError::Io(_, e) => PlanError::Io(shown.clone(), e.to_string()),
        other => PlanError::Io(shown.clone(), other.to_string()),
    })?;
    capture_plan(&shown, &bytes)?;
    String::from_utf8(bytes).map_err(|_| PlanError::NotUtf8(shown))
}

/// Where `path`, as the plan tools take it, lies inside the plans directory `plans_rel`
/// (relative to the workspace, normalized): the path relative to the plans directory, or `None`
/// when it is not a file path inside the plans directory. `submit_plan` and `write_plan`
/// resolve their paths with it, so each takes what the other does:
/// - a bare file name ([`is_bare_name`]: `p.md`, one name, no folder, no `./`) is the file of
///   that name in the plans directory;
/// - any other path is relative to `workspace` (or absolute under it), with `.` dropped and each
///   `..` applied to the name before it (lexically, as the jail then opens it), and must lie
///   inside the plans directory (`.agent/plans/p.md`, `.agent/plans/sub/../p.md`).
pub(crate) fn in_plans_dir(workspace: &Path, plans_rel: &Path, path: &str) -> Option<PathBuf> {
    if is_bare_name(path) {
        return Some(PathBuf::from(path));
    }
    let rel = jail::relative_to(workspace, path).ok()?;
    let rel = jail::normalize(&rel)?;
    let in_plans = rel.strip_prefix(plans_rel).ok()?;
    (!in_plans.as_os_str().is_empty()).then(|| in_plans.to_owned())
}

/// Whether `path` is a bare file name (`p.md`): one normal name, without a folder, `/`, `./` or
/// `..`. The plan tools take it as the file of that name in the plans directory
/// ([`in_plans_dir`]).
pub(crate) fn is_bare_name(path: &str) -> bool {
    !path.contains('/')
        && matches!(
            Path::new(path).components().collect::<Vec<_>>()[..],
            [std::path::Component::Normal(_)]
        )
}

/// The description the model sees for `submit_plan` in a mode whose approved plans hand over to
/// `target_name` (`target_id`); names the target, unlike Mastra's generic "the default mode".
/// The target is always another mode ([`crate::ModeGraph::transition_target`]).
pub fn description(target_id: &str, target_name: &str) -> String {
    format!(
        "Submit your plan for the user's approval. Write the plan as a markdown (.md) file inside \
         the plans directory first, then call this tool with its path. The run pauses until the \
         user decides. On approval the session switches to the {target_name} mode (`{target_id}`) \
         and you carry out the plan there. On rejection you stay in this mode: revise the plan \
         using the feedback, or wait for the user's next message when there is none. {} \
         Approving lets the {target_name} mode write the files the section declares; a write to \
         another file is held or refused.",
        crate::plan::scope::FORMAT
    )
}

/// JSON Schema of `submit_plan`'s input: `{ "path": string }`.
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Path of the plan file (.md), relative to the workspace, inside the plans directory (as write_plan's result names it), or a bare file name, which is the file of that name in the plans directory."
            }
        },
        "required": ["path"],
        "additionalProperties": false
    })
}
