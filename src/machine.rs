//! The session's rules without I/O, the way `quinn-proto` keeps the QUIC rules apart from
//! sockets and clocks: `(state, input, now) -> (next state, effects)`. Nothing here awaits,
//! reads a clock or touches a store. The driver ([`crate::Session`], `src/session/`) hands each
//! input to the rules with `now` from the controller's clock, saves the next state, and performs
//! the effects.
//!
//! - [`state`]: what a session keeps and saves ([`state::State`]).
//! - [`change`]: a change, [`change::Change`]: the next state, computed on a copy of the
//!   session's, with the events it emits, reading the controller's config
//!   ([`change::Config`]) and `now`. Every input's change carries two effects, performed by
//!   `Session::change` (`src/session/save.rs`): *save this record at version N* (a
//!   compare-and-swap), and only once it is saved, *swap the state in and emit these events*.
//!   A failed save drops the copy: nothing to roll back.
//! - [`decision`]: what waits for a decision and the host's answer
//!   ([`decision::PendingDecision`], [`decision::Decision`]), checked in one place
//!   ([`decision::check`]) and applied in one place, the `Decide` input
//!   (`Change::decide`), whose further effect is a [`decision::Decided`]: wait for the other
//!   calls of the reply, the run ended, or the run resumes (*run these tools*, then *call the
//!   model*).
//! - [`expiry`]: the deadline tick: when what waits expires and what the expiry answers,
//!   applied by a live session (`src/session/expiry.rs`) and to a stored record
//!   (`deadline::expire_record`) alike.
//! - [`ruling`]: a rule outcome on a tool call ([`ruling::Ruling`]: run, ask, or denied by a
//!   mode's rule), the one more input the driver feeds in before it runs a call, and the audit
//!   record a rule's outcome leaves.
//! - [`run`]: the steps of a run: a user message starts it, a plan or tool calls suspend it,
//!   an abort, a new message or a manual switch cancel what waits, and a cancelled, dropped or
//!   interrupted run answers its open tool calls.
//! - [`error`]: what the rules and the driver refuse ([`error::SessionError`]).
//!
//! Not here yet (issue 20): the run loop's inputs (a user message, a model reply, tool
//! results, an abort, a manual switch, a lease tick) are pure `Change` methods here
//! ([`run`], [`change`]), but the driver (`src/session/drive.rs`) still calls them one by one
//! between its model and tool calls: they are not yet one `Input` handed to one entry point
//! that returns the effects, as `Decide` does. A rule outcome on a tool call ([`ruling`]) is
//! one more input of the same kind: a pure function of the state and the call (its paths
//! resolved by the driver) that the driver feeds in before it runs the call.
//!
//! # The reference model stays an independent oracle
//!
//! `src/testing/reference.rs` does not call these rules: it restates them in another form (for
//! each host operation, the expected outcome, refusal and trace of events, over a few plans and
//! tool calls), and the property tests and the explorer (`src/testing/explore.rs`) drive the
//! real session, so every step they take runs these rules, and compare it with the reference
//! step by step. A rule written twice in two different shapes catches what a rule written once
//! cannot: a test that ran the core against itself would agree with every bug in it. It stays
//! small and different in kind: outcomes and traces, never records, leases or saves.
//!
//! # `decide --approve` on a plan, from the CLI to the store's save
//!
//! 1. `src/main.rs` parses the command line and dispatches to `src/cli/decide.rs`;
//!    `src/cli/setup.rs` opens the store and builds the controller, and
//!    [`crate::AgentController::restore_session`] (`src/controller.rs`) loads the session and
//!    applies any expiry.
//! 2. `src/cli/decide.rs` picks what `--decision` names among [`crate::Session::pending`], and
//!    `src/cli/flags.rs` refuses flags that do not fit it and a stale `--sha256`
//!    ([`crate::PendingDecision::check_sha256`]), then builds the [`crate::Decision`].
//! 3. `src/cli/decider.rs` calls [`crate::Session::decide`] (`src/session.rs`): it settles what
//!    a dropped operation left, resolves the decision id ([`decision::with_id`]) and calls
//!    `Session::decide_at` (`src/session/drive.rs`).
//! 4. `decide_at` checks the decision once ([`decision::check`]: pin, target, edited plan,
//!    config) and hands it to `Session::try_change` (`src/session/save.rs`), which runs the
//!    `Decide` input (`Change::decide`, `src/machine/decision.rs`) on a copy of the state: the
//!    approval's result for the model, the audit record, the switch of mode.
//! 5. `try_change` saves the next state's record by a compare-and-swap
//!    ([`crate::store::SessionStore::save`], `src/store/file.rs` and the other stores), then
//!    swaps it in and delivers its events; the run then carries on in the new mode
//!    (`src/session/drive.rs`).

pub(crate) mod change;
pub(crate) mod decision;
pub(crate) mod error;
pub(crate) mod expiry;
pub(crate) mod ruling;
pub(crate) mod run;
pub(crate) mod state;
