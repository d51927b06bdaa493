//! Whether work the code under test should have stopped was stopped (a hook or a reviewer
//! that never answers, once its bound passed or its run was cancelled): the work holds a
//! [`SetOnDrop`], and the test asks [`is_set_soon`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sets its flag when dropped.
pub struct SetOnDrop(pub Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Whether `stopped` is set within 5s (an aborted task is dropped on the runtime, soon after).
pub async fn is_set_soon(stopped: &AtomicBool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !stopped.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stopped.load(Ordering::SeqCst)
}
