//! Small real tools over the file system, confined to the workspace (or the plans directory):
//! `read_file`, `list_files`, `write_file` and `write_plan`. The CLI registers them; a harness can
//! too ([`crate::ToolRegistry::with_workspace_tools`]).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput};

/// Largest file `read_file` returns, in bytes.
const MAX_READ_BYTES: u64 = 256 * 1024;

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

/// Resolves `path` against `base` without touching the disk, refusing `..` that climbs above it,
/// then checks that the deepest existing ancestor, after symlinks, is still inside `root`.
fn confine(root: &Path, base: &Path, path: &str) -> Result<PathBuf, String> {
    let candidate = base.join(path);
    let mut normal = PathBuf::new();
    for part in candidate.components() {
        match part {
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(format!("path `{path}` leaves the allowed directory"));
                }
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    let root = root
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", root.display()))?;
    let mut existing = normal.as_path();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(p) => break p,
            Err(_) => match existing.parent() {
                Some(parent) => existing = parent,
                None => return Err(format!("cannot resolve path `{path}`")),
            },
        }
    };
    if !resolved.starts_with(&root) {
        return Err(format!(
            "path `{path}` is outside {}: access refused",
            root.display()
        ));
    }
    Ok(normal)
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
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let result = str_arg(args, "path")
            .and_then(|p| confine(ctx.workspace, ctx.workspace, p))
            .and_then(|p| {
                let len = std::fs::metadata(&p).map_err(|e| e.to_string())?.len();
                if len > MAX_READ_BYTES {
                    return Err(format!(
                        "file is {len} bytes; the limit is {MAX_READ_BYTES}"
                    ));
                }
                std::fs::read_to_string(&p).map_err(|e| e.to_string())
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
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
        let result = confine(ctx.workspace, ctx.workspace, path).and_then(|dir| {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
                let entry = entry.map_err(|e| e.to_string())?;
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    name.push('/');
                }
                names.push(name);
            }
            names.sort();
            Ok(names.join("\n"))
        });
        match result {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => ToolOutput::error(e),
        }
    }
}

fn write_confined(root: &Path, base: &Path, args: &Value) -> Result<PathBuf, String> {
    let path = str_arg(args, "path")?;
    let content = str_arg(args, "content")?;
    let target = confine(root, base, path)?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(&target, content).map_err(|e| e.to_string())?;
    Ok(target)
}

fn shown(workspace: &Path, path: &Path) -> String {
    let workspace = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    path.strip_prefix(&workspace)
        .unwrap_or(path)
        .display()
        .to_string()
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
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        match write_confined(ctx.workspace, ctx.workspace, args) {
            Ok(p) => ToolOutput::ok(format!("Wrote {}", shown(ctx.workspace, &p))),
            Err(e) => ToolOutput::error(e),
        }
    }
}

/// `write_plan { path, content }`: writes a plan file inside the plans directory (`path` is
/// relative to the plans directory), creating it. The result names the path to pass to
/// `submit_plan`, relative to the workspace.
#[derive(Debug, Clone, Copy, Default)]
pub struct WritePlan;

#[async_trait]
impl Tool for WritePlan {
    fn name(&self) -> &str {
        "write_plan"
    }
    fn description(&self) -> String {
        "Write a markdown plan file inside the plans directory (path relative to it); the result \
         gives the path to pass to submit_plan."
            .to_owned()
    }
    fn input_schema(&self) -> Value {
        path_schema(json!({ "content": { "type": "string" } }))
    }
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        if let Err(e) = std::fs::create_dir_all(ctx.plans_dir) {
            return ToolOutput::error(format!("cannot create the plans directory: {e}"));
        }
        match write_confined(ctx.plans_dir, ctx.plans_dir, args) {
            Ok(p) => ToolOutput::ok(shown(ctx.workspace, &p)),
            Err(e) => ToolOutput::error(e),
        }
    }
}
