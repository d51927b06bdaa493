//! The user's text editor, for editing a plan before approving it (the prompt's `e` key):
//! chosen and started the way git starts its editor, on a private temporary copy of the text.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use crate::tool::submit_plan::{self, MAX_PLAN_BYTES, PlanError};

/// The editor used when neither `$VISUAL` nor `$EDITOR` names one (git's fallback too).
pub const DEFAULT_EDITOR: &str = "vi";

/// The characters that make git run an editor command through `sh -c` instead of starting it
/// directly (git's `prepare_shell_cmd`): with any of them, `EDITOR="code --wait"` or
/// `EDITOR="'/path with space/ed' -w"` work as they do in a shell.
const SHELL_METACHARACTERS: &[char] = &[
    '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', ' ', '\t', '\n', '*', '?', '[',
    '#', '~', '=', '%',
];

/// The name of the temporary copy the editor opens (`.md`, so editors highlight markdown).
const FILE_NAME: &str = "plan.md";

/// The exit status of `sh -c` when the command it was given is not found.
const COMMAND_NOT_FOUND: i32 = 127;

/// The user's text editor: a command line such as `vi`, `nano` or `code --wait`, run with the
/// file to edit as its last argument.
///
/// Chosen as git chooses it (without git's own settings): `$VISUAL`, else `$EDITOR`, else `vi`
/// ([`Editor::from_env`]). Started as git starts it: a command with shell metacharacters (a
/// space, quotes, `$`, ...) runs through `sh -c 'COMMAND "$@"' COMMAND FILE`, so arguments and
/// quoting work as in a shell; any other command is started directly. The file name is passed as
/// an argument, never spliced into the command.
///
/// # Examples
/// ```
/// use agent_controller::terminal::editor::Editor;
/// assert_eq!(Editor::new("code --wait").command(), "code --wait");
/// # #[cfg(unix)] {
/// // `true` leaves the file as it is: the text comes back unchanged.
/// let text = Editor::new("true").edit("# Plan\n\n1. Step.\n")?;
/// assert_eq!(text, "# Plan\n\n1. Step.\n");
/// let error = Editor::new("false").edit("# Plan\n").unwrap_err();
/// assert!(error.to_string().contains("exited with"), "{error}");
/// # }
/// # Ok::<(), agent_controller::terminal::editor::EditorError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Editor {
    command: String,
}

impl Editor {
    /// The editor with this command line (not checked until [`Editor::edit`] starts it).
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
        }
    }

    /// The user's editor: the first of `$VISUAL` and `$EDITOR` that is set and not blank, else
    /// [`DEFAULT_EDITOR`] (git's order, without `GIT_EDITOR` and `core.editor`).
    pub fn from_env() -> Self {
        let chosen = ["VISUAL", "EDITOR"]
            .iter()
            .filter_map(|key| std::env::var(key).ok())
            .find(|command| !command.trim().is_empty());
        Self::new(chosen.unwrap_or_else(|| DEFAULT_EDITOR.to_owned()))
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Writes `text` to a new file in a private temporary directory, runs the editor on it and
    /// waits for it to exit, then reads the file back and removes the directory. Blocks: from
    /// async code, call it on a blocking thread (`tokio::task::spawn_blocking`).
    ///
    /// The editor shares the terminal: it inherits stdin, and its stdout goes to this process's
    /// stderr (on Unix), so output on stdout (events, `--json`) gets none of the editor's
    /// drawing.
    ///
    /// # Errors
    /// [`EditorError::TempFile`] when the copy cannot be written or read back,
    /// [`EditorError::NotStarted`] when the editor cannot be started (not found, not
    /// executable), [`EditorError::Failed`] when it exits unsuccessfully (a shell's 127, command
    /// not found, included), [`EditorError::Emptied`] when the file is left empty or blank, and
    /// [`EditorError::Invalid`] when it is left larger than a plan may be or not UTF-8. In every
    /// case the edit is lost and nothing else changed.
    pub fn edit(&self, text: &str) -> Result<String, EditorError> {
        let dir = tempfile::Builder::new()
            .prefix("agent-controller-edit-")
            .tempdir()
            .map_err(EditorError::TempFile)?;
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, text).map_err(EditorError::TempFile)?;
        let status =
            self.command_for(&path)
                .status()
                .map_err(|source| EditorError::NotStarted {
                    command: self.command.clone(),
                    source,
                })?;
        if !status.success() {
            return Err(EditorError::Failed {
                command: self.command.clone(),
                status: describe(status, self.through_shell()),
            });
        }
        let bytes = read_at_most(&path, MAX_PLAN_BYTES).map_err(EditorError::TempFile)?;
        match submit_plan::capture_plan(FILE_NAME, &bytes) {
            Ok(_) => String::from_utf8(bytes)
                .map_err(|_| EditorError::Invalid(PlanError::NotUtf8(FILE_NAME.to_owned()))),
            Err(PlanError::Empty(_)) => Err(EditorError::Emptied),
            Err(other) => Err(EditorError::Invalid(other)),
        }
    }

    /// Whether the command runs through `sh -c` (it holds a shell metacharacter), as git does.
    fn through_shell(&self) -> bool {
        cfg!(unix) && self.command.contains(SHELL_METACHARACTERS)
    }

    fn command_for(&self, path: &Path) -> Command {
        let mut command = if self.through_shell() {
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg(format!("{} \"$@\"", self.command))
                .arg(&self.command);
            sh
        } else {
            let mut words = self.command.split_whitespace();
            let mut direct = Command::new(words.next().unwrap_or(DEFAULT_EDITOR));
            direct.args(words);
            direct
        };
        command.arg(path).stdin(Stdio::inherit());
        if let Some(stderr) = stderr_for_stdout() {
            command.stdout(stderr);
        }
        command
    }
}

/// This process's stderr, as the editor's stdout (Unix); `None` to let it inherit stdout.
#[cfg(unix)]
fn stderr_for_stdout() -> Option<Stdio> {
    use std::os::fd::AsFd;
    let stderr = std::io::stderr();
    stderr.as_fd().try_clone_to_owned().ok().map(Stdio::from)
}

#[cfg(not(unix))]
fn stderr_for_stdout() -> Option<Stdio> {
    None
}

/// The exit status in words; a shell's 127 says the command was not found.
fn describe(status: ExitStatus, through_shell: bool) -> String {
    match status.code() {
        Some(COMMAND_NOT_FOUND) if through_shell => {
            format!("{status} (the shell did not find the command)")
        }
        _ => status.to_string(),
    }
}

/// The file's bytes, at most `limit` + 1 of them (one more than a plan may have, so a larger
/// file is refused as too large without reading all of it).
fn read_at_most(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Why editing a plan gave no edited text. The prompt says so and nothing changes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditorError {
    /// The temporary copy could not be written or read back.
    #[error("the temporary copy of the plan could not be written or read: {0}")]
    TempFile(#[source] std::io::Error),
    /// The editor could not be started (not found, not executable).
    #[error(
        "the editor `{command}` could not be started: {source} (set $VISUAL or $EDITOR to your editor)"
    )]
    NotStarted {
        /// The editor's command line.
        command: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },
    /// The editor exited unsuccessfully.
    #[error("the editor `{command}` exited with {status}")]
    Failed {
        /// The editor's command line.
        command: String,
        /// Its exit status, in words.
        status: String,
    },
    /// The editor left the file empty or blank.
    #[error("the edited plan is empty")]
    Emptied,
    /// The editor left a file no plan may be (larger than 1 MiB, not UTF-8).
    #[error("the edited plan cannot be approved: {0}")]
    Invalid(#[source] PlanError),
    /// The thread waiting for the editor ended without an answer.
    #[error("the editor was lost: {0}")]
    Lost(String),
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn commands_with_shell_metacharacters_run_through_the_shell_as_git_runs_them() {
        assert!(!Editor::new("vi").through_shell());
        assert!(Editor::new("code --wait").through_shell());
        assert!(Editor::new("'/opt/my editor/ed'").through_shell());
        assert!(Editor::new("$HOME/bin/ed").through_shell());
    }

    #[test]
    fn arguments_and_quotes_in_the_command_reach_the_editor() {
        // The shell splits the command; the file comes last.
        let editor = Editor::new(
            "f() { test \"$1\" = '--wait me' && printf '# Edited\\n' > \"$2\"; }; f '--wait me'",
        );
        assert_eq!(editor.edit("# Plan\n").expect("edited"), "# Edited\n");
    }

    #[test]
    fn a_missing_editor_a_failing_one_and_an_emptied_file_give_no_text() {
        let missing = Editor::new("/no/such/editor-here").edit("# Plan\n");
        assert!(
            matches!(missing, Err(EditorError::NotStarted { .. })),
            "{missing:?}"
        );
        let missing = Editor::new("no-such-editor-here --wait").edit("# Plan\n");
        let Err(EditorError::Failed { status, .. }) = missing else {
            panic!("{missing:?}");
        };
        assert!(status.contains("did not find the command"), "{status}");
        let emptied = Editor::new("truncate -s 0").edit("# Plan\n");
        assert!(matches!(emptied, Err(EditorError::Emptied)), "{emptied:?}");
        let blank = Editor::new("sh -c 'printf \"  \\n\\n\" > \"$0\"'").edit("# Plan\n");
        assert!(matches!(blank, Err(EditorError::Emptied)), "{blank:?}");
        let huge = Editor::new("truncate -s 2M").edit("# Plan\n");
        assert!(
            matches!(huge, Err(EditorError::Invalid(PlanError::TooLarge(..)))),
            "{huge:?}"
        );
        let latin1 = Editor::new("sh -c 'printf \"caf\\351\\n\" > \"$0\"'").edit("# Plan\n");
        assert!(
            matches!(latin1, Err(EditorError::Invalid(PlanError::NotUtf8(_)))),
            "{latin1:?}"
        );
    }
}
