//! The session's rules without I/O: pure functions of the session's state, what a host or the
//! model gives (a decision, the ids it names) and `now`, as `quinn-proto` keeps the QUIC rules
//! apart from sockets and clocks. Nothing here awaits, reads a clock or touches a store: the
//! driver ([`crate::Session`]) calls these rules, performs what they say (saves, emits, calls
//! the model or a tool) and tells the caller.
//!
//! One file per concept:
//!
//! - [`decision`]: what a decision names ([`decision::named`], [`decision::with_id`]) and
//!   whether it may be applied ([`decision::check`]): the one place a plan's or a tool call's
//!   decision is checked, the `sha256` pin compared ([`decision::check_pin`]) and an edited
//!   plan validated.
//! - [`expiry`]: when what waits expires and what the expiry answers
//!   ([`expiry::expire`]), applied by a live session and to a stored record alike.
//!
//! Not here yet (issue 20): the run loop's transitions (a model reply, tool results, an abort,
//! a manual switch, a lease tick) still live in the driver ([`crate::Session`], `src/run.rs` and
//! `src/session.rs`), which saves each change through a checkpoint it rolls back on failure.
//!
//! # `decide --approve` on a plan, from the CLI to the store's save
//!
//! 1. `src/main.rs` parses the command line and dispatches to `src/cli/decide.rs`
//!    ([`crate::store::open`] opens the store, [`crate::AgentController::restore_session`]
//!    loads and applies any expiry).
//! 2. `src/cli/decide.rs` lists what waits ([`crate::Session::pending`]), picks the decision
//!    `--decision` names, and `src/cli/flags.rs` refuses flags that do not fit it and a stale
//!    `--sha256` ([`crate::PendingDecision::check_sha256`], which is [`decision::check_pin`]),
//!    then builds the [`crate::Decision`].
//! 3. `src/cli/decider.rs` calls [`crate::Session::decide`] (`src/session.rs`): it settles what
//!    a dropped operation left and applies expiry ([`expiry::expire`]), resolves the decision id
//!    ([`decision::with_id`]) and calls `Session::decide_at` (`src/run.rs`).
//! 4. `decide_at` checks the decision once ([`decision::check`]: pin, target, edited plan,
//!    config) and applies it: the approval's result for the model, the audit record, the switch
//!    of mode, then `commit` (`src/session.rs`), which saves the record by a compare-and-swap
//!    ([`crate::store::SessionStore::save`], `src/store/file.rs` and the other stores) before
//!    its events go out; the run then carries on in the new mode.

pub(crate) mod decision;
pub(crate) mod expiry;
