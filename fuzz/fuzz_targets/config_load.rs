//! Config loading: any bytes in a config file give a graph or an error with a location, never a
//! panic, a hang or unbounded memory (`config::load`, `check_with_tools`, `warnings`).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use agent_controller::{ToolRegistry, config};
use libfuzzer_sys::fuzz_target;

fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ac-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.join("modes.toml")
    })
}

fuzz_target!(|bytes: &[u8]| {
    std::fs::write(file(), bytes).expect("write");
    let loaded = config::load(file());
    if let Ok(text) = std::str::from_utf8(bytes) {
        let tools = ToolRegistry::with_workspace_tools();
        let errors = config::check_with_tools(text, "fuzz.toml", |name| tools.knows(name));
        let _ = config::warnings(text, "fuzz.toml", |name| name == "write_plan");
        // The loader and `check` agree on whether the text is valid (tool names aside).
        if errors.is_empty() {
            let graph = loaded.expect("check found no error, so load succeeds");
            let _ = graph.check_tools(|name| tools.knows(name));
        }
        for error in errors {
            assert!(error.location().is_some(), "{error}");
            let _ = error.to_string();
        }
    } else {
        let error = loaded.expect_err("not UTF-8");
        assert!(error.location().is_some(), "{error}");
    }
});
