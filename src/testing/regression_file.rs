//! The regression file a check reads and writes: a regular file of bounded size, never a
//! symlink, a FIFO or a device (it may come from a cloned repository).

use std::path::Path;

use crate::config::MAX_CONFIG_BYTES;

/// Checks the regression file at `path` before proptest reads it: absent is fine (it is
/// created on the first failure); otherwise it must be a regular file (not a symlink, FIFO or
/// device), at most [`MAX_CONFIG_BYTES`] bytes, valid UTF-8.
///
/// # Errors
/// A sentence saying what is wrong with the file; nothing is read past the limit.
pub(crate) fn check(path: &Path) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    if meta.file_type().is_symlink() {
        return Err("it is a symlink; a regression file must be a regular file".to_owned());
    }
    if !meta.is_file() {
        return Err("it is not a regular file (a FIFO, device or directory)".to_owned());
    }
    let bytes = crate::jail::read_file(path, MAX_CONFIG_BYTES).map_err(|e| e.to_string())?;
    std::str::from_utf8(&bytes).map_err(|e| format!("it is not valid UTF-8: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::config::ConfigError;
    use crate::controller::AgentController;
    use crate::testing::{Check, CheckError, Setup};
    use crate::tool::ToolRegistry;

    fn build_correct(setup: Setup) -> Result<AgentController, ConfigError> {
        setup
            .builder()
            .tools(ToolRegistry::with_workspace_tools())
            .build()
    }

    #[test]
    fn a_check_refuses_an_oversized_regression_file_before_running() {
        // Trial M0: `verify` read its regression file with no bound (`/dev/zero` as the file
        // exhausted memory). Failed before: the check ran and returned Ok.
        let dir = tempfile::tempdir().expect("a directory");
        let big = dir.path().join("big.txt");
        let len = usize::try_from(crate::config::MAX_CONFIG_BYTES).expect("fits") + 1;
        std::fs::write(&big, vec![b'a'; len]).expect("write");
        let result = Check::new("config/modes.toml")
            .cases(1)
            .regressions(&big)
            .run(build_correct);
        assert!(
            matches!(result, Err(CheckError::Regressions { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_missing_or_small_text_file_is_accepted() {
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("r.txt");
        assert_eq!(check(&file), Ok(()));
        std::fs::write(&file, "cc 00\n").expect("write");
        assert_eq!(check(&file), Ok(()));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_devices_fifos_and_large_or_binary_files_are_refused() {
        let dir = tempfile::tempdir().expect("a directory");
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        assert!(check(&link).expect_err("symlink").contains("symlink"));
        assert!(check(std::path::Path::new("/dev/zero")).is_err());
        let fifo = dir.path().join("fifo.txt");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(check(&fifo).is_err());
        }
        let big = dir.path().join("big.txt");
        let len = usize::try_from(crate::config::MAX_CONFIG_BYTES).expect("fits") + 1;
        std::fs::write(&big, vec![b'a'; len]).expect("write");
        assert!(check(&big).is_err());
        let binary = dir.path().join("bin.txt");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).expect("write");
        assert!(check(&binary).expect_err("binary").contains("UTF-8"));
    }
}
