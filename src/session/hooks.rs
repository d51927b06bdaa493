//! The driver's side of hooks ([`crate::hook`]): it asks the controller's hooks about a tool
//! call or a plan (the I/O: a hook may be a command or any async code), sends `hook_decided`
//! for each answer, and hands the combined verdict to the rules
//! ([`crate::machine::ruling::hooked`]), which alone decide what it does.

use std::sync::Arc;

use crate::event::Event;
use crate::hook::{Hook, HookError, HookRecord, HookRequest, HookSubject, HookVerdict, combine};

use super::Session;

impl Session {
    /// The combined verdict of the hooks that apply to `subject` in run `run_id` (`None` when
    /// none applies or the controller has none), each answer sent as `hook_decided` and a
    /// failure logged. A hook that fails, panics, or is still deciding when the run is
    /// cancelled counts as ask.
    pub(crate) async fn consult_hooks(
        &mut self,
        run_id: &Arc<str>,
        subject: HookSubject,
    ) -> Option<HookRecord> {
        if self.shared.hooks.is_empty() {
            return None;
        }
        let request = HookRequest::new(
            &*self.id,
            &**run_id,
            self.shared.graph.mode(self.state.mode).id(),
            &self.shared.workspace,
            subject,
        );
        let mut records = Vec::new();
        for hook in self.shared.hooks.clone() {
            if !hook.applies_to(&request) {
                continue;
            }
            let answer = match self
                .run_token
                .run_until_cancelled(ask_caught(hook.clone(), request.clone()))
                .await
            {
                Some(answer) => answer,
                None => Err(HookError::new(
                    "the run was cancelled before the hook answered",
                )),
            };
            let record = HookRecord::of(hook.name(), answer);
            if let Some(error) = &record.error {
                tracing::warn!(hook = %record.hook, %error, "hook failed: counted as ask");
            }
            self.emit(Event::HookDecided {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                tool_call_id: request.subject.tool_call_id().to_owned(),
                tool_name: request.subject.tool_name().to_owned(),
                hook: record.clone(),
            });
            records.push(record);
        }
        combine(records)
    }
}

/// `hook`'s answer on `request`, in a task of its own when a runtime runs this, so a panic in
/// it is caught (a [`tokio::task::JoinError`]) and becomes an error.
async fn ask_caught(hook: Arc<dyn Hook>, request: HookRequest) -> Result<HookVerdict, HookError> {
    let task = tokio::spawn(async move { hook.decide(&request).await });
    match task.await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => Err(HookError::new("the hook panicked")),
        Err(e) => Err(HookError::new(format!("the hook did not finish: {e}"))),
    }
}
