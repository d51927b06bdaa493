//! A store whose saves fail on demand: [`Faulty`].

use agent_controller::store::{MemoryStore, SessionRecord, SessionStore, StoreError};

/// How a [`Faulty`] store treats saves.
pub const SAVE_OK: u8 = 0;
pub const SAVE_CONFLICTS: u8 = 1;
pub const SAVE_STALLS: u8 = 2;

/// A memory store whose saves can be made to conflict (as if another process always wins) or to
/// never finish (as if the disk hung).
#[derive(Default)]
pub struct Faulty {
    inner: MemoryStore,
    saves: std::sync::atomic::AtomicU8,
    /// Saves still let through before `saves` applies.
    pass: std::sync::atomic::AtomicUsize,
}

impl Faulty {
    pub fn set(&self, mode: u8) {
        self.saves.store(mode, std::sync::atomic::Ordering::SeqCst);
    }

    /// Saves treated as `mode` from the save after the next `pass` on.
    pub fn set_after(&self, pass: usize, mode: u8) {
        self.pass.store(pass, std::sync::atomic::Ordering::SeqCst);
        self.set(mode);
    }
}

#[async_trait::async_trait]
impl SessionStore for Faulty {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.load(id).await
    }
    async fn save(&self, r: &SessionRecord, e: Option<u64>) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let passed = self
            .pass
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if passed {
            return self.inner.save(r, e).await;
        }
        match self.saves.load(Ordering::SeqCst) {
            SAVE_CONFLICTS => {
                return Err(StoreError::Conflict {
                    session_id: r.session_id.clone(),
                    expected: e,
                    found: Some(7),
                });
            }
            SAVE_STALLS => std::future::pending::<()>().await,
            _ => {}
        }
        self.inner.save(r, e).await
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }
    async fn list_pending(
        &self,
        now_ms: u64,
    ) -> Result<agent_controller::store::PendingListing, StoreError> {
        self.inner.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
}

/// A memory store whose next two saves, once [`Paired::pair`] arms it, each wait until both
/// have arrived, then go on in turn: two writers that loaded the same version race to the
/// compare-and-swap, and exactly one wins it, every time.
#[derive(Default)]
pub struct Paired {
    inner: MemoryStore,
    barrier: std::sync::Mutex<Option<(std::sync::Arc<tokio::sync::Barrier>, usize)>>,
}

impl Paired {
    /// The next two saves meet before either is made.
    pub fn pair(&self) {
        *self.barrier.lock().expect("barrier") =
            Some((std::sync::Arc::new(tokio::sync::Barrier::new(2)), 2));
    }
}

#[async_trait::async_trait]
impl SessionStore for Paired {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.load(id).await
    }
    async fn save(&self, r: &SessionRecord, e: Option<u64>) -> Result<(), StoreError> {
        let meet = {
            let mut slot = self.barrier.lock().expect("barrier");
            let meet = slot.as_ref().map(|(b, _)| b.clone());
            if let Some((_, left)) = slot.as_mut() {
                *left -= 1;
                if *left == 0 {
                    *slot = None;
                }
            }
            meet
        };
        if let Some(barrier) = meet {
            barrier.wait().await;
        }
        self.inner.save(r, e).await
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }
    async fn list_pending(
        &self,
        now_ms: u64,
    ) -> Result<agent_controller::store::PendingListing, StoreError> {
        self.inner.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
}
