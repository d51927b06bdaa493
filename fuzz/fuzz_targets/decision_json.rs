//! Decision JSON (what `Session::resume_json` takes): any bytes give a decision or a typed error.
#![no_main]

use agent_controller::Decision;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        if let Ok(decision) = Decision::from_json(&value) {
            let _ = format!("{decision:?}");
        }
    }
});
