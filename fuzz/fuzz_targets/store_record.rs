//! Store record loading: any bytes in a session file give a record or a typed error, from
//! `FileStore::load` and `list_pending`, never a panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use agent_controller::store::{FileStore, SessionStore};
use libfuzzer_sys::fuzz_target;

struct Setup {
    dir: PathBuf,
    store: FileStore,
    runtime: tokio::runtime::Runtime,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ac-fuzz-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let store = FileStore::open(&dir).expect("store");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        Setup {
            dir,
            store,
            runtime,
        }
    })
}

fuzz_target!(|bytes: &[u8]| {
    let s = setup();
    // The same bytes as a pending record and as a plain one.
    std::fs::write(s.dir.join("fuzz.pending.json"), bytes).expect("write");
    std::fs::write(s.dir.join("plain.json"), bytes).expect("write");
    s.runtime.block_on(async {
        let _ = s.store.load("fuzz").await;
        let _ = s.store.load("plain").await;
        let _ = s.store.list_pending(agent_controller::store::now_millis()).await;
    });
});
