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
    /// Set by the save's task as the save returns: whether it landed. Read by
    /// [`Session::run_state`] while the session is not borrowed, so a run whose future was
    /// dropped during this save reads as it ended without an await.
    landed: Arc<std::sync::OnceLock<bool>>,
    /// The save renews the running run's lease and nothing else ([`Input::LeaseTick`]): its
    /// state is the session's with the lease, so a run dropped during it is ended in memory at
    /// once ([`Session::abandon`]), on the session's state, whether the save lands or not.
    lease_only: bool,
}

impl Saving {
    /// The run as a look at the session sees it while this save, left behind by a dropped
    /// operation, is not yet taken in ([`Session::recover`]): the run of the state it saves once
    /// the save landed (or while it is still under way: a save that started is taken to land,
    /// and the next operation learns whether it did), else of the state before; a run that
    /// would still be running there was dropped with the operation, and reads aborted.
    pub(crate) fn shown_run<'a>(
        &'a self,
        before: Option<&'a (Arc<str>, RunState)>,
    ) -> Option<(&'a str, RunState)> {
        let run = match self.landed.get() {
            Some(false) => before,
            Some(true) | None => self.next.run.as_ref(),
        };
        run.map(|(id, state)| match state {
            RunState::Running => (&**id, RunState::Aborted),
            other => (&**id, *other),
        })
    }
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
        let lease_only = matches!(input, Input::LeaseTick);
        let next = rules(self, Some(&mut copy), &mut events, input)?;
        if self.shared.store.is_some() {
            // Boxed: a save's future (the record, the store's own) is kilobytes, and every step
            // of a run awaits `handle`; inline, it would make each of their futures as large
            // (issue 36 item 13: a run's future 9.8 KB, copied at each start). One allocation
            // beside a write to the store.
            Box::pin(self.save_then_swap(copy, events, lease_only)).await?;
        } else {
            self.swap_unsaved(copy, events)?;
        }
        Ok(next)
    }

    /// Swaps `next` in without a store (a refusable change computed on a copy) and delivers
    /// `events`.
    ///
    /// # Errors
    /// [`StoreError::Unsupported`] when `next` gives a workspace allowance: there is no store
    /// to keep it in; `next` and `events` are dropped and the session is as before.
    fn swap_unsaved(&mut self, mut next: State, events: Vec<Event>) -> Result<(), SessionError> {
        self.stamp_origins(&mut next);
        if !self.given_workspace_allowances(&next).is_empty() {
            return Err(SessionError::Store(StoreError::Unsupported(
                "keep a workspace allowance: the controller has no session store".to_owned(),
            )));
        }
        self.swap_in(None, next, events);
        Ok(())
    }

    /// The workspace allowances `next` gives: those the session's state lacks.
    fn given_workspace_allowances(&self, next: &State) -> Vec<crate::allowance::Allowance> {
        next.workspace_allowances
            .iter()
            .filter(|a| !self.state.workspace_allowances.iter().any(|b| b.id == a.id))
            .cloned()
            .collect()
    }

    /// Saves `next` at the expected version, then swaps it in and delivers `events`; when the
    /// save fails, `next` and `events` are dropped and the session is as before.
    async fn save_then_swap(
        &mut self,
        mut next: State,
        events: Vec<Event>,
        lease_only: bool,
    ) -> Result<(), SessionError> {
        let Some(store) = self.shared.store.clone() else {
            return self.swap_unsaved(next, events);
        };
        self.stamp_origins(&mut next);
        // The effect of a decision that gave a workspace allowance: kept in the store only
        // after the session's record (with the decision's audit record) is saved, so a failed
        // save (a lost race, a dead process) never leaves an allowance no saved decision gave.
        let given = self.given_workspace_allowances(&next);
        let keeper = store.clone();
        let (mut next, mut events, mut merged) = (next, events, false);
        let saved = loop {
            match self
                .save_once(store.clone(), next, events, lease_only)
                .await
            {
                Ok(()) => break Ok(()),
                // Another process revoked an allowance of the run this session holds, and changed
                // nothing else: the run takes the revoke in and saves again, losing nothing.
                Err((err @ StoreError::Conflict { .. }, Some((mut back, held))))
                    if !merged && self.state.holds_lease =>
                {
                    if !self.take_revocations(store.as_ref(), &mut back).await {
                        break Err(err);
                    }
                    (next, events, merged) = (back, held, true);
                }
                Err((err, _)) => break Err(err),
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

    /// One save of `next` at the expected version, swapped in (with `events`) once it landed;
    /// when it did not, the error and (where the save ran to its end) `next` and `events` back.
    async fn save_once(
        &mut self,
        store: Arc<dyn crate::store::SessionStore>,
        next: State,
        events: Vec<Event>,
        lease_only: bool,
    ) -> Result<(), (StoreError, Option<(State, Vec<Event>)>)> {
        let record = self.record_of(&next);
        let version = record.version;
        let expected = (self.version > 0).then_some(self.version);
        let span = tracing::debug_span!("save", session_id = %self.id, version);
        match tokio::runtime::Handle::try_current() {
            // In its own task, so a dropped operation leaves a save that either happened or
            // did not, and the next operation finds out which ([`Session::recover`]).
            Ok(runtime) => {
                use tracing::Instrument;
                let landed = Arc::new(std::sync::OnceLock::new());
                let told = landed.clone();
                let save = async move {
                    let saved = store.save(&record, expected).await;
                    let _first = told.set(saved.is_ok());
                    saved
                };
                let task = runtime.spawn(save.instrument(span));
                let saving = self.saving.insert(Saving {
                    version,
                    task,
                    next: Box::new(next),
                    events,
                    landed,
                    lease_only,
                });
                let joined = (&mut saving.task).await;
                let saving = self.saving.take();
                match (joined, saving) {
                    (Ok(Ok(())), Some(saving)) => {
                        self.swap_in(Some(saving.version), *saving.next, saving.events);
                        Ok(())
                    }
                    (Ok(Err(e)), Some(saving)) => Err((e, Some((*saving.next, saving.events)))),
                    (Ok(result), None) => result.map_err(|e| (e, None)),
                    (Err(e), _) => Err((StoreError::backend("the save task failed", e), None)),
                }
            }
            Err(_) => {
                use tracing::Instrument;
                match store.save(&record, expected).instrument(span).await {
                    Ok(()) => {
                        self.swap_in(Some(version), next, events);
                        Ok(())
                    }
                    Err(e) => Err((e, Some((next, events)))),
                }
            }
        }
    }

    /// After a save of the run this session holds lost to another writer: whether that writer
    /// only revoked allowances of the session (`allowances revoke --session` in another
    /// process, which a run's lease does not hold off). Then the revoked allowances are dropped
    /// from the session and from `next`, the session takes the stored version, and the caller
    /// saves `next` again. Anything else another process changed (a decision, a switch, a take
    /// over: the stored run is not this one under this lease, or the mode differs, or the
    /// decisions or the conversation saved are not where this session's begin) is not taken in: `false`, and the save's conflict stands.
    async fn take_revocations(
        &mut self,
        store: &dyn crate::store::SessionStore,
        next: &mut State,
    ) -> bool {
        let Ok(Some(stored)) = store.load(&self.id).await else {
            return false;
        };
        let (Some((run_id, _)), Some(lease)) = (&self.state.run, &self.state.lease) else {
            return false;
        };
        let ours = stored.run.as_ref().is_some_and(|r| {
            r.run_id == **run_id
                && r.state == RunState::Running
                && r.owner.as_deref() == Some(lease.owner.as_str())
        });
        let kept = |a: &crate::allowance::Allowance| stored.allowances.iter().any(|b| b.id == a.id);
        let only_revoked = stored.allowances.len() < self.state.allowances.len()
            && stored
                .allowances
                .iter()
                .all(|a| self.state.allowances.iter().any(|b| b.id == a.id));
        let same = stored.version > self.version
            && ours
            && stored.mode_id == self.mode_arc().as_ref()
            && self.state.history.starts_with(&stored.history)
            && stored.pending.is_none()
            && stored.pending_tool_calls.is_empty()
            && stored.pending_suspensions.is_empty()
            && self.state.messages.starts_with(&stored.messages);
        if !(same && only_revoked) {
            return false;
        }
        tracing::info!(session_id = %self.id, version = stored.version, "allowances revoked by another process taken in");
        self.state.allowances.retain(kept);
        next.allowances.retain(kept);
        let mode_id = self.mode_arc();
        self.state.refresh_allowed(&mode_id);
        next.refresh_allowed(&mode_id);
        self.version = stored.version;
        true
    }

    /// Records on each allowance `next` gives (one the session's state lacks) what runs its
    /// tool's calls ([`crate::tool::Tool::origin`]), so it covers that origin only.
    fn stamp_origins(&self, next: &mut State) {
        let known = |a: &crate::allowance::Allowance| {
            self.state
                .all_allowances()
                .any(|b| b.id == a.id && b.scope == a.scope)
        };
        for allowance in next
            .allowances
            .iter_mut()
            .chain(next.workspace_allowances.iter_mut())
        {
            if allowance.origin.is_none() && !known(allowance) {
                allowance.origin = self.origin_of(&allowance.tool_name);
            }
        }
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
            if saved && saving.lease_only && self.abandoned.is_some() {
                // The run was ended in memory on the state this save renewed the lease of
                // (`abandon`): only the version it took counts.
                self.version = saving.version;
            } else if saved {
                self.swap_in(Some(saving.version), *saving.next, saving.events);
            }
        }
        if let Some(events) = self.abandoned.take() {
            // The end of a dropped run, shown since it was dropped: save it now.
            let held = events.clone();
            let next = self.state.clone();
            if let Err(e) = self.save_then_swap(next, events, false).await {
                self.abandoned = Some(held);
                return Err(e);
            }
        }
        Ok(())
    }

    /// What a run's future dropped before it returned leaves: the run ends aborted at once, in
    /// memory (every tool call of the last reply gets its result; the events wait for the
    /// save), and the next operation or [`Session::settle`] saves it. A future dropped while
    /// a save of a change was under way is left to them: whether that save landed is learned
    /// there (meanwhile [`Session::run_state`] reads the run as that save leaves it); one
    /// dropped while a save renewed the lease (a state that differs from the session's by the
    /// lease only) ends the run at once all the same.
    pub(crate) fn abandon(&mut self) {
        self.cancel.finish();
        if self.saving.as_ref().is_some_and(|s| !s.lease_only) || self.abandoned.is_some() {
            return;
        }
        let Some((run_id, RunState::Running)) = &self.state.run else {
            return;
        };
        let run_id = run_id.clone();
        // Dropped while a call of a reply ran: the abort that answers each open call as it stood.
        let finished = std::mem::take(
            self.subagent_results
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let abort = match self.abort_while_running.take() {
            Some(Abort::ToolCalls {
                run_id: of,
                at,
                next,
                waiting,
                suspended,
                running,
                allowed,
                mut together,
            }) if of == run_id => {
                // The `subagent` calls that finished beside those still running keep their
                // results: their children ran.
                for (index, output) in finished {
                    if let Some(ran) = together.iter_mut().find(|t| t.index == index) {
                        ran.output = Some(output);
                    }
                }
                Abort::ToolCalls {
                    run_id: of,
                    at,
                    next,
                    waiting,
                    suspended,
                    running,
                    allowed,
                    together,
                }
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
    let reported = events.len();
    let state = copy.unwrap_or(&mut session.state);
    let next = Change {
        config: session.shared.config(),
        now_ms: session.shared.now_ms(),
        id: &session.id,
        workspace: WorkspaceScope {
            workspace: &session.workspace,
            fingerprint: &session.shared.fingerprint,
        },
        state: &mut *state,
        events: &mut *events,
    }
    .handle(input);
    // A run of an approved plan ended: its report gets the plan file's hash now (I/O), in
    // the state saved and in the event.
    for event in &mut events[reported..] {
        if let Event::PlanReport { report, .. } = event {
            let current = plan_file_sha256(&session.shared.workspace, &report.path);
            report.plan_changed = current.as_deref() != Some(report.approved_sha256.as_str());
            report.current_sha256 = current;
            state.plan_report = Some((**report).clone());
        }
    }
    next
}

/// The sha256 of the plan file at `path` in `workspace` as a plan is hashed
/// ([`crate::plan::capture_plan`]), read through the workspace jail; `None` when it cannot be
/// read as a plan (removed, too large, not text).
fn plan_file_sha256(workspace: &std::path::Path, path: &str) -> Option<String> {
    let jail = crate::jail::Jail::open(workspace).ok()?;
    let bytes = jail
        .read(std::path::Path::new(path), crate::plan::MAX_PLAN_BYTES)
        .ok()?;
    crate::plan::capture_plan(path, &bytes)
        .ok()
        .map(|plan| plan.sha256)
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
            own_model: self.model_id.as_deref(),
            child: self.depth > 0,
        }
    }
}
