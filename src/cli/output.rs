//! Writing to stdout and stderr: `say!`, `note!`, and what happens once stdout fails.

use std::io::Write;

use crate::cli::exit::Exit;

/// Writes a line to stdout. Once a write fails (a reader that closed stdout, `| head -1`; a full
/// disk) the rest of the output is dropped, but the command still does its work: a decision
/// already saved carries its run on to where it is saved again, never stranded `running`. The
/// error is reported when the command ends ([`Exit::StdoutClosed`]; see [`stdout_failure`]).
macro_rules! say {
    ($($arg:tt)*) => { $crate::cli::output::emit(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Writes a line to stderr; a closed stderr is ignored (the outcome is still in the exit status).
macro_rules! note {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = writeln!(::std::io::stderr(), $($arg)*);
    }};
}

/// The first error writing to stdout, if any: from then on output is dropped ([`emit`]).
static STDOUT_FAILURE: std::sync::OnceLock<std::io::Error> = std::sync::OnceLock::new();

/// The error that made stdout fail, once a write failed.
pub(crate) fn stdout_failure() -> Option<&'static std::io::Error> {
    STDOUT_FAILURE.get()
}

/// Writes to stdout; see [`say!`]. After a failed write nothing more is written (and the
/// failure is kept for the end of the command), so a run in progress is never cut off by its
/// output.
pub(crate) fn emit(text: std::fmt::Arguments<'_>) {
    if stdout_failure().is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        let _ = STDOUT_FAILURE.set(e);
    }
}

/// The exit of a command whose output failed: [`Exit::StdoutClosed`], after saying on stderr
/// what failed and how the command itself ended (a closed pipe stays quiet, as `| head` expects).
pub(crate) fn report_stdout_failure(error: &std::io::Error, exit: Exit) -> Exit {
    if error.kind() != std::io::ErrorKind::BrokenPipe {
        note!(
            "error: cannot write to stdout: {error}; the output from then on was lost, but the command did its work (it ended with exit status {}: {})",
            exit.code(),
            exit.meaning()
        );
    }
    Exit::StdoutClosed
}
