//! The session's rules without I/O: pure functions of the session's state, what a host or the
//! model gives (a decision, the ids it names) and `now`, as `quinn-proto` keeps the QUIC rules
//! apart from sockets and clocks. Nothing here awaits, reads a clock or touches a store: the
//! driver ([`crate::Session`]) calls these rules, performs what they say (saves, emits, calls
//! the model or a tool) and tells the caller.
//!
//! One file per concept:
//!
//! - [`expiry`]: when what waits expires and what the expiry answers ([`expiry::expire`]),
//!   applied by a live session (`src/session/expiry.rs`) and to a stored record
//!   (`deadline::expire_record`) alike: written once.
//!
//! The rules of deciding are pure too, but live beside the types they read, in
//! `src/session/decision.rs`: `check` (the one place a plan's or a tool call's decision is
//! checked, the `sha256` pin compared by `check_pin` and an edited plan validated) and `named` /
//! `with_id` (which pending decision the host's ids name). They move here once the session's
//! state types do: `machine` sits below `mode`, `deadline` and `session` (no import cycles,
//! `tests::modules_import_each_other_one_way`), so it cannot name their types yet.
//!
//! Not here yet (issue 20): the run loop's transitions (a model reply, tool results, an abort,
//! a manual switch, a lease tick) are pure methods of `Change` (`src/session/change.rs`,
//! `src/session/drive.rs`), which compute the next state on a copy of the session's; the
//! driver saves it at the expected version and only then swaps it in (no checkpoint, no
//! rollback).
//!
//! # The reference model stays an independent oracle
//!
//! `src/testing/reference.rs` does not call these rules: it restates them in another form (for
//! each host operation, the expected outcome, refusal and trace of events, over a few plans and
//! tool calls), and the property tests and the explorer (`src/testing/explore.rs`) compare it
//! with the real session step by step. A rule written twice in two different shapes catches
//! what a rule written once cannot: a test that ran the core against itself would agree with
//! every bug in it. It must stay small and different in kind: outcomes and traces, never records,
//! leases or saves.
//!
//! # `decide --approve` on a plan, from the CLI to the store's save
//!
//! 1. `src/main.rs` parses the command line and dispatches to `src/cli/decide.rs`
//!    (`src/cli/setup.rs` opens the store and builds the controller;
//!    [`crate::AgentController::restore_session`] loads the session and applies any expiry).
//! 2. `src/cli/decide.rs` lists what waits ([`crate::Session::pending`]), picks the decision
//!    `--decision` names, and `src/cli/flags.rs` refuses flags that do not fit it and a stale
//!    `--sha256` ([`crate::PendingDecision::check_sha256`], the library's one pin check),
//!    then builds the [`crate::Decision`].
//! 3. `src/cli/decider.rs` calls [`crate::Session::decide`] (`src/session.rs`): it settles what
//!    a dropped operation left and applies expiry ([`expiry::expire`]), resolves the decision id
//!    (`with_id`, `src/session/decision.rs`) and calls `Session::decide_at`
//!    (`src/session/drive.rs`).
//! 4. `decide_at` checks the decision once (`check`, `src/session/decision.rs`: pin, target,
//!    edited plan, config) and applies it to a copy of the session's state (`Change::decide_plan`,
//!    `src/session/drive.rs`): the approval's result for the model, the audit record, the switch
//!    of mode. `Session::change` (`src/session/change.rs`) saves that state's record by a
//!    compare-and-swap ([`crate::store::SessionStore::save`], `src/store/file.rs` and the other
//!    stores), then swaps it in and delivers its events; the run then carries on in the new mode.

pub(crate) mod change;
pub(crate) mod decision;
pub(crate) mod error;
pub(crate) mod expiry;
pub(crate) mod state;
