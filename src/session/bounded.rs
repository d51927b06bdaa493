//! Asking code the session does not control (a hook, a reviewer: a host's code, a command, a
//! model) for an answer: in a task of its own, so a panic is caught, within a time bound, and
//! only while the run is not cancelled. Whichever way the answer is not given, the task is
//! aborted, so nothing it started runs on unwatched. The one place where both hooks
//! (`session/hooks.rs`) and reviewers (`session/reviewers.rs`) are bounded.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Why an asked task gave no answer.
#[derive(Debug)]
pub(super) enum Unanswered {
    /// It was still running past its bound (the bound), and was stopped.
    TimedOut(Duration),
    /// The run was cancelled while it ran, and it was stopped.
    Cancelled,
    /// It panicked.
    Panicked,
    /// It ended without an answer otherwise (it was aborted from outside).
    Stopped(tokio::task::JoinError),
}

impl Unanswered {
    /// Why, in words for the log and the record, naming the asked one `who` (`"hook"`,
    /// `"reviewer"`).
    pub(super) fn explain(&self, who: &str) -> String {
        match self {
            Unanswered::TimedOut(bound) => format!("it timed out after {}s", bound.as_secs_f64()),
            Unanswered::Cancelled => format!("the run was cancelled before the {who} answered"),
            Unanswered::Panicked => format!("the {who} panicked"),
            Unanswered::Stopped(e) => format!("the {who} did not finish: {e}"),
        }
    }
}

/// What `work` answers, run in a task of its own, given at most `bound` and only until `run`
/// is cancelled. The task is aborted on every way out without its answer: past the bound, on
/// the run's cancellation, and when this future is dropped.
///
/// # Errors
/// [`Unanswered`]: it timed out, the run was cancelled, it panicked or was aborted.
pub(super) async fn ask_bounded<T: Send + 'static>(
    run: &CancellationToken,
    bound: Duration,
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, Unanswered> {
    let mut task = tokio::spawn(work);
    let _stop = AbortOnDrop(task.abort_handle());
    let answer = run
        .run_until_cancelled(tokio::time::timeout(bound, &mut task))
        .await;
    match answer {
        None => Err(Unanswered::Cancelled),
        Some(Err(_elapsed)) => Err(Unanswered::TimedOut(bound)),
        Some(Ok(Ok(answer))) => Ok(answer),
        Some(Ok(Err(e))) if e.is_panic() => Err(Unanswered::Panicked),
        Some(Ok(Err(e))) => Err(Unanswered::Stopped(e)),
    }
}

/// Aborts its task when dropped: work whose answer nobody waits for any more stops.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Sets its flag when dropped.
    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Work that never answers, setting `stopped` once it is dropped.
    fn never(stopped: &Arc<AtomicBool>) -> impl Future<Output = ()> + Send + 'static {
        let guard = SetOnDrop(stopped.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await
        }
    }

    /// Whether `stopped` is set within a second (the aborted task's drop runs on the runtime).
    async fn is_set_soon(stopped: &AtomicBool) -> bool {
        for _ in 0..100 {
            if stopped.load(Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stopped.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn an_answer_within_the_bound_is_the_answer() {
        let run = CancellationToken::new();
        let got = ask_bounded(&run, Duration::from_secs(1), async { 7 }).await;
        assert!(matches!(got, Ok(7)), "{got:?}");
    }

    #[tokio::test]
    async fn past_the_bound_the_work_is_stopped_and_says_it_timed_out() {
        let (run, stopped) = (CancellationToken::new(), Arc::new(AtomicBool::new(false)));
        let got = ask_bounded(&run, Duration::from_millis(50), never(&stopped)).await;
        let Err(why) = got else { panic!("{got:?}") };
        assert_eq!(why.explain("hook"), "it timed out after 0.05s");
        assert!(is_set_soon(&stopped).await, "the work was stopped");
    }

    #[tokio::test]
    async fn a_cancelled_run_stops_the_work() {
        let (run, stopped) = (CancellationToken::new(), Arc::new(AtomicBool::new(false)));
        run.cancel();
        let got = ask_bounded(&run, Duration::from_secs(600), never(&stopped)).await;
        let Err(why) = got else { panic!("{got:?}") };
        assert_eq!(
            why.explain("hook"),
            "the run was cancelled before the hook answered"
        );
        assert!(is_set_soon(&stopped).await, "the work was stopped");
    }

    #[tokio::test]
    async fn a_panic_is_caught() {
        async fn boom() -> u8 {
            panic!("boom")
        }
        let run = CancellationToken::new();
        let got = ask_bounded(&run, Duration::from_secs(1), boom()).await;
        let Err(why) = got else { panic!("{got:?}") };
        assert_eq!(why.explain("reviewer"), "the reviewer panicked");
    }
}
