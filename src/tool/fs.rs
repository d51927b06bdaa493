//! Small real tools over the file system, confined to the workspace (or the plans directory):
//! `read_file`, `list_files`, `write_file` and `write_plan`. The CLI registers them; a harness can
//! too ([`crate::ToolRegistry::with_workspace_tools`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{PathLocation, Tool, ToolAccess, ToolContext, ToolOutput, submit_plan};
use crate::jail::{self, FileId, Jail, JailError};

/// Largest file `read_file` returns, in bytes (256 KiB).
pub const MAX_READ_BYTES: u64 = 256 * 1024;

/// Largest content `write_file` writes, in bytes (4 MiB, as much as a config may hold); larger
/// content is refused and nothing is written. `write_plan` writes at most
/// [`submit_plan::MAX_PLAN_BYTES`], the most `submit_plan` reads.
pub const MAX_WRITE_BYTES: usize = 4 * 1024 * 1024;

/// Most entries `list_files` returns; a last line says how many more the folder holds.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// The workspace tools a model can write a plan file with: a planning mode that offers none of
/// them cannot author a plan ([`crate::ModeGraph::planning_modes_without_plan_writer`]).
pub const PLAN_WRITING_TOOLS: [&str; 2] = ["write_plan", "write_file"];

/// The four workspace tools, ready to register.
pub fn workspace_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile),
        Arc::new(ListFiles),
        Arc::new(WriteFile),
        Arc::new(WritePlan),
    ]
}

/// The workspace as a jail (refusing the protected areas), and `path` (as the model gave it)
/// relative to it.
fn in_workspace(ctx: &ToolContext<'_>, path: &str) -> Result<(Jail, PathBuf), JailError> {
    let rel = jail::relative_to(ctx.workspace, path)?;
    let workspace = Jail::open(ctx.workspace)?.protecting(ctx.protected_paths);
    Ok((workspace, rel))
}

/// The identities of the plan files pending a decision, which no tool may change.
async fn protected(workspace: &Jail, ctx: &ToolContext<'_>) -> Result<Vec<FileId>, String> {
    let paths = ctx.pending_plans.pending_plan_paths().await.map_err(|e| {
        format!("cannot tell which plan files are pending a decision, so no file is written: {e}")
    })?;
    Ok(paths
        .iter()
        .filter_map(|p| jail::relative_to(ctx.workspace, p).ok())
        .filter_map(|rel| workspace.file_id(&rel))
        .collect())
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string argument `{key}`"))
}

fn path_schema(extra: Value) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": { "path": { "type": "string", "description": "Path relative to the workspace." } },
        "required": ["path"],
        "additionalProperties": false
    });
    if let (Some(props), Some(extra)) = (schema["properties"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            props.insert(k.clone(), v.clone());
        }
        schema["required"] = json!(["path", "content"]);
    }
    schema
}

/// `read_file { path }`: the text of a file inside the workspace (at most 256 KiB).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> String {
        "Read a UTF-8 text file inside the workspace.".to_owned()
    }
    fn input_schema(&self) -> Value {
        path_schema(Value::Null)
    }
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let result = str_arg(args, "path").and_then(|path| {
            let (workspace, rel) = in_workspace(ctx, path).map_err(|e| e.to_string())?;
            let bytes = workspace
                .read(&rel, MAX_READ_BYTES)
                .map_err(|e| e.to_string())?;
            String::from_utf8(bytes).map_err(|_| format!("`{path}` is not valid UTF-8 text"))
        });
        match result {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => ToolOutput::error(e),
        }
    }
}

/// `list_files { path? }`: the entries of a directory inside the workspace, one per line, sorted,
/// directories with a trailing `/`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFiles;

#[async_trait]
impl Tool for ListFiles {
    fn name(&self) -> &str {
        "list_files"
    }
    fn description(&self) -> String {
        "List the files in a directory inside the workspace (default: the workspace root)."
            .to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "path": { "type": "string", "description": "Directory relative to the workspace." } },
            "additionalProperties": false
        })
    }
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }
    /// The folder listed: `path`, or the workspace itself when it is left out or empty.
    fn locate(&self, _arg: &str, path: Option<&str>, ctx: &ToolContext<'_>) -> PathLocation {
        Some(super::in_workspace(ctx.workspace, listed_dir(path)))
    }
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let path = listed_dir(args.get("path").and_then(Value::as_str));
        let result = in_workspace(ctx, path).and_then(|(workspace, rel)| workspace.list(&rel));
        match result {
            Ok(names) if names.len() > MAX_LIST_ENTRIES => {
                let left_out = names.len() - MAX_LIST_ENTRIES;
                let listed = names[..MAX_LIST_ENTRIES].join("\n");
                ToolOutput::ok(format!("{listed}\n({left_out} more entries not listed)"))
            }
            Ok(names) => ToolOutput::ok(names.join("\n")),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// The folder `list_files` lists for its `path` argument: the workspace itself (`.`) when the
/// call leaves it out or gives an empty one.
fn listed_dir(path: Option<&str>) -> &str {
    path.filter(|p| !p.is_empty()).unwrap_or(".")
}

/// `write_file { path, content }`: writes a file inside the workspace, creating folders.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> String {
        "Write a text file inside the workspace, replacing it if it exists.".to_owned()
    }
    fn input_schema(&self) -> Value {
        path_schema(json!({ "content": { "type": "string" } }))
    }
    fn access(&self) -> ToolAccess {
        ToolAccess::Writes
    }
    /// It writes the file at `path`.
    fn written_path_args(&self, _args: &Value) -> Vec<String> {
        vec!["path".to_owned()]
    }
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let (path, content) = match (str_arg(args, "path"), str_arg(args, "content")) {
            (Ok(path), Ok(content)) => (path, content),
            (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
        };
        if content.len() > MAX_WRITE_BYTES {
            return ToolOutput::error(format!(
                "content of {} bytes is larger than write_file writes ({MAX_WRITE_BYTES} bytes)",
                content.len()
            ));
        }
        let (workspace, rel) = match in_workspace(ctx, path) {
            Ok(found) => found,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        let protected = match protected(&workspace, ctx).await {
            Ok(ids) => ids,
            Err(e) => return ToolOutput::error(e),
        };
        match workspace.write(&rel, content.as_bytes(), &protected) {
            Ok(()) => ToolOutput::ok(format!("Wrote {}", rel.display())),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// `write_plan { path, content }`: writes a plan file inside the plans directory, creating
/// folders. `path` is relative to the workspace, as the result and `submit_plan` name plans
/// (`.agent/plans/p.md`, subfolders and a `..` that stays inside the plans directory allowed),
/// or a bare file name (`p.md`), which lands in the plans directory; a path outside it is
/// refused. The result names the file written, relative to the workspace: the path to pass to
/// `submit_plan`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WritePlan;

#[async_trait]
impl Tool for WritePlan {
    fn name(&self) -> &str {
        "write_plan"
    }
    fn description(&self) -> String {
        "Write a markdown (.md) plan file inside the plans directory, replacing it if it \
         exists. `path` is relative to the workspace and inside the plans directory (for example \
         `.agent/plans/add-dark-mode.md`; subfolders are fine), or a bare file name \
         (`add-dark-mode.md`), which lands in the plans directory. The result is the path of the \
         file written, relative to the workspace: pass it to submit_plan, and to write_plan again \
         to revise the plan."
            .to_owned()
    }
    fn input_schema(&self) -> Value {
        let mut schema = path_schema(json!({ "content": { "type": "string" } }));
        schema["properties"]["path"]["description"] = json!(
            "Path of the plan file (.md), relative to the workspace and inside the plans \
             directory, or a bare file name, which lands in the plans directory."
        );
        schema
    }
    fn access(&self) -> ToolAccess {
        ToolAccess::Plans
    }
    /// It writes the plan file at `path` (a plan tool: an approved plan's files do not bind
    /// it).
    fn written_path_args(&self, _args: &Value) -> Vec<String> {
        vec!["path".to_owned()]
    }
    /// Where the plan lands, as [`Tool::execute`] puts it: a bare name in the plans directory,
    /// any other path relative to the workspace with `.` and `..` applied as written.
    fn locate(&self, arg: &str, path: Option<&str>, ctx: &ToolContext<'_>) -> PathLocation {
        if arg != "path" {
            return path.map(|path| super::in_workspace(ctx.workspace, path));
        }
        let (plans_rel, rel) = match path.map(|path| plan_target(ctx, path))? {
            Ok(target) => target,
            Err(why) => return Some(Err(why)),
        };
        Some(Ok(plans_rel.join(rel)))
    }
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        match write_plan(args, ctx).await {
            Ok(path) => ToolOutput::ok(path),
            Err(e) => ToolOutput::error(e),
        }
    }
}

/// Where `write_plan` writes `path`, relative to the plans directory `plans_rel`, resolved as
/// `submit_plan` resolves it ([`submit_plan::in_plans_dir`]): a bare file name (`p.md`, no
/// folder, no `./`) lands in the plans directory; any other path is relative to the workspace,
/// as the tool's results name plans, and must lie inside the plans directory after `.` and `..`
/// are applied (`.agent/plans/p.md`, `./.agent/plans/sub/p.md`, `.agent/plans/sub/../p.md`).
///
/// # Errors
/// A message saying where plans go, for a path outside the plans directory.
fn plan_path(ctx: &ToolContext<'_>, plans_rel: &Path, path: &str) -> Result<PathBuf, String> {
    submit_plan::in_plans_dir(ctx.workspace, plans_rel, path).ok_or_else(|| {
        let plans = plans_rel.display();
        format!(
            "plan file `{path}` is outside the plans directory {plans}: paths are relative to \
             the workspace, as submit_plan takes them; write `{plans}/NAME.md` (folders inside \
             it are fine), or give a bare file name `NAME.md`, which lands there"
        )
    })
}

/// Where `write_plan` writes `path`: the plans directory relative to the workspace, and the
/// file relative to it ([`plan_path`]). The one place the tool, and the rules on it
/// ([`Tool::locate`]), read its path.
///
/// # Errors
/// A message for a plans directory outside the workspace, or a path outside it.
fn plan_target(ctx: &ToolContext<'_>, path: &str) -> Result<(PathBuf, PathBuf), String> {
    let plans_rel = jail::inside(ctx.workspace, ctx.plans_dir).ok_or_else(|| {
        format!(
            "the plans directory {} is not inside the workspace {}",
            ctx.plans_dir.display(),
            ctx.workspace.display()
        )
    })?;
    let rel = plan_path(ctx, &plans_rel, path)?;
    Ok((plans_rel, rel))
}

/// Writes the plan of a `write_plan` call; returns its path relative to the workspace. A plan
/// file that is pending a decision is never replaced: the new plan gets a fresh name beside it.
async fn write_plan(args: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
    let path = str_arg(args, "path")?;
    let content = str_arg(args, "content")?;
    if content.len() as u64 > submit_plan::MAX_PLAN_BYTES {
        return Err(format!(
            "a plan of {} bytes is larger than submit_plan reads ({} bytes)",
            content.len(),
            submit_plan::MAX_PLAN_BYTES
        ));
    }
    if !submit_plan::is_markdown(path) {
        return Err(format!(
            "plan file `{path}` is not a markdown file: the name must end in .md"
        ));
    }
    let (plans_rel, rel) = plan_target(ctx, path)?;
    let workspace = Jail::open(ctx.workspace)
        .map_err(|e| e.to_string())?
        .protecting(ctx.protected_paths);
    let label = format!("the plans directory {}", plans_rel.display());
    let plans = workspace
        .subdir(&plans_rel, true, &label)
        .map_err(|e| format!("cannot use the plans directory: {e}"))?;
    let protected = protected(&workspace, ctx).await?;
    let pending = plans
        .file_id(&rel)
        .is_some_and(|id| protected.contains(&id));
    let written = if pending {
        plans.write_new(&rel, content.as_bytes())
    } else {
        plans
            .write(&rel, content.as_bytes(), &protected)
            .map(|()| rel)
    };
    let written = written.map_err(|e| e.to_string())?;
    Ok(plans_rel.join(written).display().to_string())
}
