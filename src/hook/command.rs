//! A `[[hooks]]` entry run as a command ([`CommandHook`], feature `command-hooks`): one JSON
//! object on stdin ([`super::HookRequest`]), one JSON object on stdout,
//! `{"decision": "allow" | "deny" | "ask", "reason": "..."}`.
//!
//! The command is hostile input like any workspace file: it runs in the workspace, without a
//! shell, in a process group of its own, and everything that is not one well-formed answer in
//! time counts as ask, saying why (a timeout, after which it is killed with every process it
//! started; a crash or a non-zero exit; output that is not one
//! JSON object, or two of them; more than [`MAX_HOOK_OUTPUT`] bytes, after which it is not read
//! further and is killed; a `deny` without a reason; a script it names in the workspace, such as
//! `hooks/guard.py`, that does not exist).

use std::process::Stdio;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Hook, HookConfig, HookError, HookRequest, HookVerdict};

/// The most a hook command may print on stdout: 64 KiB. Past it, its answer counts as ask.
pub const MAX_HOOK_OUTPUT: usize = 64 * 1024;

/// The most of a hook command's stderr kept for the log when it fails: 4 KiB.
const MAX_HOOK_STDERR: usize = 4 * 1024;

/// A [`Hook`] that runs a `[[hooks]]` entry's command for each request it applies to.
#[derive(Debug, Clone)]
pub struct CommandHook {
    config: HookConfig,
    name: String,
}

impl CommandHook {
    /// The hook of the config entry `config`.
    pub fn new(config: HookConfig) -> Self {
        let name = config.name();
        Self { config, name }
    }
}

/// A command's answer as it writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
}

#[async_trait::async_trait]
impl Hook for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn applies_to(&self, request: &HookRequest) -> bool {
        self.config.applies_to(request)
    }

    fn timeout(&self) -> std::time::Duration {
        self.config.timeout
    }

    async fn decide(&self, request: &HookRequest) -> Result<HookVerdict, HookError> {
        let input = serde_json::to_vec(request)
            .map_err(|e| HookError::new(format!("the request could not be written: {e}")))?;
        let out = run_command(
            &self.config.command,
            self.config.timeout,
            &request.workspace,
            input,
        )
        .await?;
        parse_answer(&out)
    }
}

/// Runs `command` (a program and its arguments, never through a shell) in `workspace` with
/// `input` on stdin, and returns its whole stdout: the runner of `[[hooks]]` and command
/// `[[reviewers]]` alike. Bounded: killed past `timeout`, or past [`MAX_HOOK_OUTPUT`] bytes of
/// output.
///
/// # Errors
/// Why there is no answer to read, in words for the log: a script it names in the workspace
/// is missing, it could not start, it timed out, printed too much, or exited non-zero (with
/// the start of its stderr).
pub(crate) async fn run_command(
    command: &[String],
    timeout: std::time::Duration,
    workspace: &std::path::Path,
    input: Vec<u8>,
) -> Result<Vec<u8>, HookError> {
    match tokio::time::timeout(timeout, run_unbounded(command, workspace, input)).await {
        Ok(out) => out,
        Err(_) => Err(HookError::new(format!(
            "it timed out after {}s and was stopped",
            timeout.as_secs_f64()
        ))),
    }
}

/// [`run_command`] without its time bound (the caller's timeout drops this future, and the
/// child with it).
async fn run_unbounded(
    command: &[String],
    workspace: &std::path::Path,
    input: Vec<u8>,
) -> Result<Vec<u8>, HookError> {
    {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| HookError::new("it has no command"))?;
        // A script the command names in the workspace that is not there: nothing to run (and
        // nothing started for it).
        if let Some(missing) = command.iter().find(|part| {
            !part.starts_with('-')
                && part.contains('/')
                && std::path::Path::new(part).is_relative()
                && !workspace.join(part).exists()
        }) {
            return Err(HookError::new(format!(
                "`{}` does not exist in the workspace",
                crate::display::neutralize_line_within(missing, 200)
            )));
        }
        let mut command = tokio::process::Command::new(program);
        // Its own process group, so that what it starts (a shell's children) is stopped with it.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command
            .args(args)
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A timeout drops this future: the child goes with it.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| HookError::new(format!("it could not be started: {e}")))?;
        // Dropped on every way out (an answer, an error, the caller's timeout dropping this
        // future): the processes the command left are stopped.
        let _group = ProcessGroup(child.id());
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let write = async move {
            if let Some(stdin) = stdin.as_mut() {
                // A command that does not read its input is not an error in itself.
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
            drop(stdin);
        };
        let read = async move {
            let mut out = Vec::new();
            if let Some(stdout) = stdout {
                // One byte more than allowed, to tell "at the bound" from "over it".
                let mut limited = stdout.take(MAX_HOOK_OUTPUT as u64 + 1);
                let _ = limited.read_to_end(&mut out).await;
            }
            out
        };
        let read_err = async move {
            let mut err = Vec::new();
            if let Some(stderr) = stderr {
                let _ = stderr
                    .take(MAX_HOOK_STDERR as u64)
                    .read_to_end(&mut err)
                    .await;
            }
            err
        };
        let ((), out, err) = tokio::join!(write, read, read_err);
        if out.len() > MAX_HOOK_OUTPUT {
            let _ = child.kill().await;
            return Err(HookError::new(format!(
                "it printed more than {MAX_HOOK_OUTPUT} bytes and was stopped"
            )));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| HookError::new(format!("it could not be waited for: {e}")))?;
        if !status.success() {
            let stderr = String::from_utf8_lossy(&err);
            return Err(HookError::new(format!(
                "it exited with {status}{}",
                if stderr.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", stderr.trim())
                }
            )));
        }
        Ok(out)
    }
}

/// The process group a command runs in (its leader's id: the command's), killed when this is
/// dropped, so a command never leaves processes running behind it: `kill_on_drop` stops the
/// command itself only, and a script's `sleep` or server would outlive it. A group that is
/// gone already is nothing to do; a process id is not reused while a group of that id lives.
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        #[cfg(unix)]
        // Never 1: `kill(-1)` would signal every process there is.
        if let Some(pid) = self
            .0
            .and_then(|id| i32::try_from(id).ok())
            .filter(|&id| id > 1)
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// The verdict of a command's whole stdout `out`: exactly one JSON object with a known
/// `decision` (a `deny` with a non-blank `reason`).
fn parse_answer(out: &[u8]) -> Result<HookVerdict, HookError> {
    let text = std::str::from_utf8(out)
        .map_err(|_| HookError::new("its answer is not UTF-8"))?
        .trim();
    if text.is_empty() {
        return Err(HookError::new("it printed no answer"));
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let shape = "a JSON object {\"decision\": \"allow\" | \"deny\" | \"ask\", \"reason\": \"...\"}";
    let answer = match stream.next() {
        // An object only: serde would read a struct from a list too.
        Some(Ok(value @ serde_json::Value::Object(_))) => {
            serde_json::from_value::<Answer>(value)
                .map_err(|e| HookError::new(format!("its answer is not {shape}: {e}")))?
        }
        Some(Ok(_)) => return Err(HookError::new(format!("its answer is not {shape}"))),
        Some(Err(e)) => {
            return Err(HookError::new(format!(
                "its answer is not a JSON object {{\"decision\": \"allow\" | \"deny\" | \"ask\", \"reason\": \"...\"}}: {e}"
            )));
        }
        None => return Err(HookError::new("it printed no answer")),
    };
    if stream.next().is_some() {
        return Err(HookError::new(
            "it printed more than one JSON value: an answer is one object",
        ));
    }
    let reason = answer.reason.filter(|r| !r.trim().is_empty());
    match answer.decision.as_str() {
        "allow" => Ok(HookVerdict::Allow),
        "ask" => Ok(HookVerdict::Ask),
        "deny" => Ok(HookVerdict::Deny {
            reason: reason.unwrap_or_else(|| "no reason given".to_owned()),
        }),
        other => Err(HookError::new(format!(
            "its decision `{}` is not allow, deny or ask",
            crate::display::neutralize_line_within(other, 80)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_is_an_answer_and_anything_else_is_not() {
        assert_eq!(
            parse_answer(br#"{"decision":"deny","reason":"no"}"#),
            Ok(HookVerdict::deny("no"))
        );
        assert_eq!(
            parse_answer(b"{\"decision\":\"allow\"}\n"),
            Ok(HookVerdict::Allow)
        );
        assert_eq!(parse_answer(br#"{"decision":"ask"}"#), Ok(HookVerdict::Ask));
        for bad in [
            &br#"{"decision":"allow"}{"decision":"allow"}"#[..],
            br#"{"decision":"allow"} {"decision":"deny","reason":"x"}"#,
            b"allow",
            b"",
            br#"{"decision":"yes"}"#,
            br#"{"decision":"allow","extra":1}"#,
            br#"["allow"]"#,
            b"\xff",
        ] {
            assert!(
                parse_answer(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
