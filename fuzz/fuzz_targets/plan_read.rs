//! Plan reading: any bytes in a plan file are captured (title, body, sha256) or refused with a
//! typed error, through `submit_plan::read_plan` (the jail) and `capture_plan`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use agent_controller::tool::submit_plan::{capture_plan, read_plan};
use libfuzzer_sys::fuzz_target;

fn workspace() -> &'static PathBuf {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        let ws = std::env::temp_dir().join(format!("ac-fuzz-plan-{}", std::process::id()));
        std::fs::create_dir_all(ws.join(".agent/plans")).expect("plans dir");
        ws
    })
}

fuzz_target!(|bytes: &[u8]| {
    let ws = workspace();
    std::fs::write(ws.join(".agent/plans/p.md"), bytes).expect("write");
    let read = read_plan(ws, &ws.join(".agent/plans"), ".agent/plans/p.md");
    let captured = capture_plan("p.md", bytes);
    match (read, captured) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.sha256, b.sha256);
            assert_eq!((a.title, a.plan), (b.title, b.plan));
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!("read_plan and capture_plan disagree: {a:?} / {b:?}"),
    }
});
