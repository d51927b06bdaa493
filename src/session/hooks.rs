//! The driver's side of hooks ([`crate::hook`]): it asks the controller's hooks about a tool
//! call or a plan (the I/O: a hook may be a command or any async code), sends `hook_decided`
//! for each answer, and hands the combined verdict to the rules
//! ([`crate::machine::ruling::hooked`]), which alone decide what it does.

use std::sync::Arc;

use crate::event::Event;
use crate::hook::{Hook, HookError, HookRecord, HookRequest, HookSubject, combine};

use super::Session;
use super::bounded::ask_bounded;

impl Session {
    /// The combined verdict of the hooks that apply to `subject` in run `run_id` (`None` when
    /// none applies or the controller has none), each answer sent as `hook_decided` and a
    /// failure logged. A hook that fails, panics, is still deciding past its
    /// [`Hook::timeout`] or when the run is cancelled counts as ask (and is stopped).
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
            let answer = ask_bounded(&self.run_token, bound_of(&*hook), {
                let (hook, request) = (hook.clone(), request.clone());
                async move { hook.decide(&request).await }
            })
            .await
            .unwrap_or_else(|why| Err(HookError::new(why.explain("hook"))));
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

/// How long the driver waits for `hook`: its [`Hook::timeout`] (a `[[hooks]]` entry's
/// `timeout`, else [`crate::hook::DEFAULT_HOOK_TIMEOUT`]), at most
/// [`crate::hook::MAX_HOOK_TIMEOUT`], as a config's `timeout` is.
fn bound_of(hook: &dyn Hook) -> std::time::Duration {
    hook.timeout().min(crate::hook::MAX_HOOK_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    use crate::hook::{HookVerdict, MAX_HOOK_TIMEOUT};

    /// A hook whose `timeout` is the one given.
    struct Waits(Duration);

    #[async_trait::async_trait]
    impl Hook for Waits {
        fn name(&self) -> &str {
            "waits"
        }

        fn timeout(&self) -> Duration {
            self.0
        }

        async fn decide(&self, _: &HookRequest) -> Result<HookVerdict, HookError> {
            Ok(HookVerdict::Ask)
        }
    }

    #[test]
    fn a_hook_is_waited_for_its_own_timeout_at_most_the_longest() {
        assert_eq!(bound_of(&Waits(Duration::from_secs(3))).as_secs(), 3);
        assert_eq!(bound_of(&Waits(Duration::MAX)), MAX_HOOK_TIMEOUT);
    }

    #[cfg(feature = "command-hooks")]
    #[test]
    fn a_command_hook_is_waited_for_its_entrys_timeout_else_the_default() {
        let graph = crate::config::parse(
            "[[modes]]\nid = \"build\"\n\n\
             [[hooks]]\non = \"plan\"\ncommand = [\"true\"]\ntimeout = \"2m\"\n\n\
             [[hooks]]\non = \"plan\"\ncommand = [\"false\"]\n",
            "modes.toml",
        )
        .expect("valid");
        let bounds: Vec<Duration> = graph
            .hooks()
            .iter()
            .map(|entry| bound_of(&crate::hook::command::CommandHook::new(entry.clone())))
            .collect();
        assert_eq!(
            bounds,
            [Duration::from_secs(120), crate::hook::DEFAULT_HOOK_TIMEOUT]
        );
    }
}
