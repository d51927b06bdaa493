//! A clock the test sets: every time a controller reads (deadlines, leases, `updatedAt`) comes
//! from it, so no test sleeps for time to pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 2027-01-15T08:00:00Z, in milliseconds since the Unix epoch.
pub const T0: u64 = 1_800_000_000_000;

/// Milliseconds since the Unix epoch, set by the test; clones share the time.
#[derive(Clone, Debug)]
pub struct TestClock(Arc<AtomicU64>);

impl TestClock {
    pub fn at(ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(ms)))
    }

    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Moves the time on by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).expect("a short step");
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.now_ms())
    }

    /// The clock for [`agent_controller::controller::AgentControllerBuilder::clock`].
    pub fn source(&self) -> impl Fn() -> SystemTime + Send + Sync + 'static {
        let clock = self.clone();
        move || clock.now()
    }
}
