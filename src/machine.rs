//! The session's rules without I/O, the way `quinn-proto` keeps the QUIC rules apart from
//! sockets and clocks: `(state, input, now) -> (next state, effects)`. Nothing here awaits,
//! reads a clock or touches a store. The driver ([`crate::Session`], `src/session/`) hands each
//! input to the one entry point, [`input::Input`] to `Change::handle` ([`input`]), with `now`
//! from the controller's clock, and performs the effects it gets back as data: it saves the
//! next state, delivers its events, then calls the model or runs the tools the rules name.
//!
//! - [`input`]: the one entry point: the inputs ([`input::Input`]: a user message, a model
//!   reply, a tool call and its result, a suspension, a decision, an abort, a manual switch, a
//!   deadline or lease tick) and the effects: *save this record at version N*
//!   ([`input::Input::saves`]), *emit these events*, and the next step ([`next::Next`]: call
//!   the model, run these tools, or wait).
//! - [`state`]: what a session keeps and saves ([`state::State`]).
//! - [`change`]: a change, [`change::Change`]: the next state, computed on a copy of the
//!   session's (or in place for an input that saves nothing), with the events it emits,
//!   reading the controller's config ([`change::Config`]) and `now`. A failed save drops the
//!   copy: nothing to roll back (`src/session/save.rs`).
//! - [`decision`]: the host's answer ([`decision::Decision`]); [`pending`]: what waits for one
//!   ([`pending::PendingDecision`]: a plan or a tool call); [`check`]: the one place a decision
//!   is checked against what waits ([`check::check`]) and the ids a host gives are resolved;
//!   [`decide`]: the one place it is applied, the `Decide` input (`Change::decide`).
//! - [`expiry`]: the deadline tick: when what waits expires and what the expiry answers,
//!   applied by a live session (`src/session/expiry.rs`) and to a stored record
//!   (`deadline::expire_record`) alike.
//! - [`review`]: what a reviewer's verdict does to a plan or a tool call that waits (`reviewerMay`).
//! - [`ruling`]: a rule outcome on a tool call ([`ruling::Ruling`]: run, ask, denied by a
//!   mode's rule, or refused for its arguments), and the audit record a rule's outcome leaves.
//! - [`scope`]: an approved plan's declared files, bound in the mode it handed over to (an
//!   allowance of scope `plan`, drift, `planScope`).
//! - [`run`]: the steps of a run: a user message starts it, the model's reply joins the
//!   conversation, a plan or tool calls suspend it, an abort, a new message or a manual switch
//!   cancel what waits, and a cancelled, dropped or interrupted run answers its open tool calls.
//! - [`tasks`]: the session's task list: what the task tools do to it, and how an approved
//!   plan's numbered steps seed it.
//! - [`error`]: what the rules and the driver refuse ([`error::SessionError`]).
//!
//! What stays in the driver: the I/O a call's outcome needs before the rules can rule on it
//! (`src/session/drive.rs`: `ruling_of` resolves the call's paths through the jail, then asks
//! [`ruling`]; `refusal` checks the arguments; a submitted plan's file is read); the driver
//! feeds the outcomes in as inputs ([`input::Input::ToolResult`],
//! [`input::Input::RuledToolResult`], [`input::Suspend`]).
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
//!    a dropped operation left, resolves the decision id ([`check::with_id`]) and calls
//!    `Session::decide_at` (`src/session/drive.rs`).
//! 4. `decide_at` checks the decision once ([`check::check`], `src/machine/check.rs`: pin,
//!    target, edited plan, config) and hands the `Decide` input to `Session::handle`
//!    (`src/session/save.rs`), which runs `Change::handle` (`src/machine/input.rs`) and so
//!    `Change::decide` (`src/machine/decide.rs`) on a copy of the state: the approval's result
//!    for the model, the audit record, the switch of mode; the next step is *call the model*.
//! 5. `Session::handle` saves the next state's record by a compare-and-swap
//!    ([`crate::store::SessionStore::save`], `src/store/file.rs` and the other stores), then
//!    swaps it in and delivers its events; `Session::carry_on` (`src/session/drive.rs`) then
//!    calls the model in the new mode.

pub(crate) mod call;
pub(crate) mod change;
pub(crate) mod check;
pub(crate) mod decide;
pub(crate) mod decision;
pub(crate) mod error;
pub(crate) mod expiry;
pub(crate) mod input;
pub(crate) mod ledger;
pub(crate) mod models;
pub(crate) mod next;
pub(crate) mod pending;
pub(crate) mod quorum;
pub(crate) mod rejection;
pub(crate) mod review;
#[cfg(test)]
pub(crate) mod rig;
pub(crate) mod ruling;
pub(crate) mod run;
pub(crate) mod scope;
pub(crate) mod state;
pub(crate) mod steps;
pub(crate) mod tasks;
