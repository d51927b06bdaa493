//! Save, then swap: what a session keeps ([`State`]) and how it changes ([`Change`]).
//!
//! A change is computed on a copy of the session's state: [`Session::handle`] clones the
//! state, lets the change's rules write the next state and the events it emits, saves the next
//! state's record at the expected version (compare-and-swap), and only then swaps the next state
//! in and delivers the events. A save that fails leaves the session's state as it was, since it
//! was never touched: there is no checkpoint and no rollback. A future dropped during the save
//! leaves the next state beside the save ([`Session::recover`]): the next operation swaps it in
//! if the save got through, and drops it otherwise.
//!
//! Every change goes through one entry point, [`Session::handle`]: an input for the rules
//! ([`crate::machine::input`]), whose effects it performs. Between saves a run also changes its
//! state in place (the inputs that do not save, [`Input::saves`]): the tool calls it runs and
//! their results, delivered at once and saved with the run's next change (a run started by a
//! message is saved when it suspends or ends).

use std::sync::Arc;

use crate::allowance::WorkspaceScope;
use crate::event::{Event, RunState};
use crate::machine::change::{Change, Config, LeaseTerms};
use crate::machine::input::{Abort, Input};
use crate::machine::next::Next;
use crate::machine::state::State;
use crate::store::StoreError;

use super::{Session, SessionError, Shared};

/// A save running in its own task, with the state it saves and that state's events: dropping
/// the operation that started it cannot leave the store and the session disagreeing, since the
/// next operation awaits it to learn how it ended and swaps the state in only if it landed.
pub(crate) struct Saving {
    version: u64,
    task: tokio::task::JoinHandle<Result<(), StoreError>>,
    next: Box<State>,
    events: Vec<Event>,
}

/// Whether `store` holds `mine`, the record of a change whose save was aborted (it got through).
async fn landed(
    store: Option<Arc<dyn crate::store::SessionStore>>,
    mut mine: crate::store::SessionRecord,
) -> bool {
    let Some(store) = store else {
        return false;
    };
    match store.load(&mine.session_id).await {
        Ok(Some(stored)) if stored.version == mine.version => {
            mine.updated_at = stored.updated_at;
            mine == stored
        }
        _ => false,
    }
}

impl Session {
    /// Hands `input` to the rules ([`Change::handle`]) with `now` from the controller's clock,
    /// and performs the effects it names: the next state is saved (compare-and-swap on the
    /// version) when the input saves ([`Input::saves`]), and only then swapped in and its
    /// events delivered; then the next step is returned for the run loop to carry out. The one
    /// way the session's state changes.
    ///
    /// # Errors
    /// What the rules refuse ([`Input::may_refuse`]), and [`SessionError::Store`] when the save
    /// fails; either way the session is as before.
    ///
    /// Cancel-safe: dropped during the save, the next state waits beside the save, and the next
    /// operation swaps it in if the save got through ([`Session::recover`]).
    pub(crate) async fn handle(&mut self, input: Input) -> Result<Next, SessionError> {
        let mut events = std::mem::take(&mut self.spare_events);
        if !input.saves() || (self.shared.store.is_none() && !input.may_refuse()) {
            // Nothing to save now, or nothing to save at all: the change cannot fail or be cut
            // off, so it needs no copy (a copy per change would cost a long conversation time
            // on every switch).
            let next = rules(self, None, &mut events, input);
            self.deliver(events);
            return next;
        }
        // A copy: a refusal or a failed save drops it, and the session is as before.
        let mut copy = self.state.clone();
        let next = rules(self, Some(&mut copy), &mut events, input)?;
        self.save_then_swap(copy, events).await?;
        Ok(next)
    }

    /// Saves `next` at the expected version, then swaps it in and delivers `events`; when the
    /// save fails, `next` and `events` are dropped and the session is as before.
    async fn save_then_swap(
        &mut self,
        next: State,
        events: Vec<Event>,
    ) -> Result<(), SessionError> {
        // The effect of a decision that gave a workspace allowance: kept in the store only
        // after the session's record (with the decision's audit record) is saved, so a failed
        // save (a lost race, a dead process) never leaves an allowance no saved decision gave.
        let given: Vec<_> = next
            .workspace_allowances
            .iter()
            .filter(|a| !self.state.workspace_allowances.iter().any(|b| b.id == a.id))
            .cloned()
            .collect();
        let Some(store) = self.shared.store.clone() else {
            if !given.is_empty() {
                return Err(SessionError::Store(StoreError::Unsupported(
                    "keep a workspace allowance: the controller has no session store".to_owned(),
                )));
            }
            self.swap_in(None, next, events);
            return Ok(());
        };
        let keeper = store.clone();
        let record = self.record_of(&next);
        let version = record.version;
        let expected = (self.version > 0).then_some(self.version);
        let span = tracing::debug_span!("save", session_id = %self.id, version);
        let saved = match tokio::runtime::Handle::try_current() {
            // In its own task, so a dropped operation leaves a save that either happened or
            // did not, and the next operation finds out which ([`Session::recover`]).
            Ok(runtime) => {
                use tracing::Instrument;
                let save = async move { store.save(&record, expected).await };
                let task = runtime.spawn(save.instrument(span));
                let saving = self.saving.insert(Saving {
                    version,
                    task,
                    next: Box::new(next),
                    events,
                });
                let joined = (&mut saving.task).await;
                let saving = self.saving.take();
                match (joined, saving) {
                    (Ok(Ok(())), Some(saving)) => {
                        self.swap_in(Some(saving.version), *saving.next, saving.events);
                        Ok(())
                    }
                    (Ok(result), _) => result,
                    (Err(e), _) => Err(StoreError::backend("the save task failed", e)),
                }
            }
            Err(_) => {
                use tracing::Instrument;
                let saved = store.save(&record, expected).instrument(span).await;
                if saved.is_ok() {
                    self.swap_in(Some(version), next, events);
                }
                saved
            }
        };
        if saved.is_ok() {
            self.keep_workspace_allowances(keeper.as_ref(), &given)
                .await;
        }
        saved.map_err(|err| {
            tracing::warn!(session_id = %self.id, error = %err, "save failed; the change was not applied");
            SessionError::Store(err)
        })
    }

    /// Keeps the workspace allowances `given` by a decision whose record is saved. One the
    /// store fails to keep (or keeps none: [`StoreError::Unsupported`]) is dropped from the
    /// session too, and the log says so: the decision stands, its allowance allows nothing,
    /// and the user is asked again (an allowance in doubt allows nothing).
    async fn keep_workspace_allowances(
        &mut self,
        store: &dyn crate::store::SessionStore,
        given: &[crate::allowance::Allowance],
    ) {
        let mut lost = Vec::new();
        for allowance in given {
            if let Err(error) = store.save_workspace_allowance(allowance).await {
                tracing::warn!(session_id = %self.id, allowance = %allowance.id, %error, "workspace allowance not kept; it allows nothing");
                lost.push(allowance.id.clone());
            }
        }
        if !lost.is_empty() {
            self.state
                .workspace_allowances
                .retain(|a| !lost.contains(&a.id));
            let mode_id = self.mode_arc();
            self.state.refresh_allowed(&mode_id);
        }
    }

    /// Swaps a saved state in (saved at `version`, or with no store) and delivers its events.
    fn swap_in(&mut self, version: Option<u64>, next: State, events: Vec<Event>) {
        if let Some(version) = version {
            self.version = version;
        }
        self.state = next;
        self.deliver(events);
    }

    /// Delivers `events` in order, keeping the buffer for the next change of a running run (a
    /// session that now waits, for a decision or a message, gives it back: a held session costs
    /// memory, not time).
    fn deliver(&mut self, mut events: Vec<Event>) {
        for event in events.drain(..) {
            self.emit(event);
        }
        if matches!(self.state.run, Some((_, RunState::Running))) {
            self.spare_events = events;
        }
    }

    /// Finishes what an abandoned operation (a future dropped mid-save) left: a save that went
    /// through has its state swapped in (and its held-back events delivered), one that did not
    /// is dropped, so events of a change that was never saved are never delivered. Then the end
    /// of a run whose future was dropped ([`Session::abandon`]), shown since, is saved.
    ///
    /// A save still running (a slow or stalled store) is aborted; when it is unclear whether
    /// it got through before that, the store is asked. (A store that writes after its save
    /// future was aborted, for example from a blocking thread, can still land a save after
    /// this check; the next save then fails with [`StoreError::Conflict`] and changes nothing:
    /// restore the session.)
    ///
    /// # Errors
    /// [`SessionError::Store`] when the end of a dropped run cannot be saved; it stays shown,
    /// and the next operation tries again.
    pub(crate) async fn recover(&mut self) -> Result<(), SessionError> {
        if let Some(saving) = self.saving.take() {
            saving.task.abort();
            let saved = match saving.task.await {
                Ok(result) => result.is_ok(),
                Err(_) => landed(self.shared.store.clone(), self.record_of(&saving.next)).await,
            };
            if saved {
                self.swap_in(Some(saving.version), *saving.next, saving.events);
            }
        }
        if let Some(events) = self.abandoned.take() {
            // The end of a dropped run, shown since it was dropped: save it now.
            let held = events.clone();
            let next = self.state.clone();
            if let Err(e) = self.save_then_swap(next, events).await {
                self.abandoned = Some(held);
                return Err(e);
            }
        }
        Ok(())
    }

    /// What a run's future dropped before it returned leaves: the run ends aborted at once, in
    /// memory (every tool call of the last reply gets its result; the events wait for the
    /// save), and the next operation or [`Session::settle`] saves it. A future dropped while
    /// a save was under way is left to them: whether that save landed is learned there.
    pub(crate) fn abandon(&mut self) {
        self.cancel.finish();
        if self.saving.is_some() || self.abandoned.is_some() {
            return;
        }
        let Some((run_id, RunState::Running)) = &self.state.run else {
            return;
        };
        let run_id = run_id.clone();
        // Dropped while a call an allowance let run was running: the abort that keeps its record.
        let abort = match self.abort_while_allowed.take() {
            Some(abort) if matches!(&abort, Abort::ToolCalls { run_id: of, .. } if *of == run_id) => {
                abort
            }
            _ => Abort::Run(run_id),
        };
        let mut events = Vec::new();
        // An abort is never refused, and nothing follows it.
        let _nothing = rules(self, None, &mut events, Input::Abort(abort));
        self.abandoned = Some(events);
    }
}

/// Hands `input` to the rules ([`Change::handle`]) with `now` from the controller's clock, on
/// `copy` of the session's state, or on the state itself for `None`; the events go to `events`.
fn rules(
    session: &mut Session,
    copy: Option<&mut State>,
    events: &mut Vec<Event>,
    input: Input,
) -> Result<Next, SessionError> {
    Change {
        config: session.shared.config(),
        now_ms: session.shared.now_ms(),
        id: &session.id,
        workspace: WorkspaceScope {
            workspace: &session.workspace,
            fingerprint: &session.shared.fingerprint,
        },
        state: copy.unwrap_or(&mut session.state),
        events,
    }
    .handle(input)
}

impl Shared {
    /// What of the controller's config a change's rules read ([`Config`]).
    pub(crate) fn config(&self) -> Config<'_> {
        Config {
            graph: &self.graph,
            runtimes: &self.runtimes,
            max_revisions: self.max_revisions,
            lease: self.store.as_ref().map(|_| LeaseTerms {
                owner: &self.lease_owner,
                duration: self.lease_duration,
            }),
        }
    }
}
