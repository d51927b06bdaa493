//! The guide: everything about agent-controller that is more than one item's reference.
//!
//! The pages, in reading order:
//!
//! - [`contract`]: the hand-over contract. What `submit_plan` captures, decisions and decision
//!   ids, plan revisions, a choice of targets, editing before approving, deadlines, tool calls
//!   that wait for the user, and the decision JSON.
//! - [`plan_scope`]: the approved plan binds the build: a plan's `## Files`, what its approval
//!   grants, drift and `planScope`.
//! - [`asking`]: a tool that asks: suspending a call for the user's answer, answering it,
//!   and the built-in `ask_user`.
//! - [`tasks`]: the task list: the built-in task tools, the list in the session, and an
//!   approved plan's steps seeding it.
//! - [`subagents`]: subagent types, the `subagent` tool, and why a child never does more
//!   than its parent's mode allows.
//! - [`config`]: modes in `config/modes.toml`, and seeing a config with `graph`, `check` and
//!   `schema` (completion and validation in your editor).
//! - [`rules`]: rules on tool-call arguments, per mode: allow, ask or deny by the path a call
//!   writes or the command it runs.
//! - [`hooks`]: deciding in code or by a command before a person is asked: allow, deny or
//!   ask, narrowing what the rules allow, never widening it.
//! - [`cli`]: the command line, its exit statuses, and what the terminal shows, with a recorded
//!   session.
//! - [`models`]: real models, OpenAI-compatible endpoints and Claude.
//! - [`acp`]: editors (Zed and other ACP clients) driving modes and approvals with
//!   `agent-controller acp`.
//! - [`serve`]: deciding from anywhere (a browser, a phone, a chat) over `agent-controller
//!   serve`'s HTTP API, and the library parts under it (a session several tasks share).
//! - [`mcp`]: MCP servers' tools, gated per mode; what the jail does not cover.
//! - [`library`]: a whole host in Rust: events as a stream, cancelling, your own data.
//! - [`stores`]: durable sessions, the workspace of a session, interrupted runs and leases,
//!   several hosts on PostgreSQL, and what the stores guarantee when things fail.
//! - [`jail`]: the workspace jail every tool path goes through.
//! - [`testing`]: property tests of a config or a controller, and mutation testing.
//! - [`performance`]: what a cycle, a switch and a decision cost.
//! - [`layout`]: where each concept lives in `src/`.
//!
//! The pages are Markdown files under `src/guide/`, rendered by rustdoc; every Rust example in
//! them is a doctest that `cargo test --doc` compiles and runs.

#[doc = include_str!("guide/contract.md")]
pub mod contract {}

#[doc = include_str!("guide/plan_scope.md")]
pub mod plan_scope {}

#[doc = include_str!("guide/asking.md")]
pub mod asking {}
#[doc = include_str!("guide/tasks.md")]
pub mod tasks {}

#[doc = include_str!("guide/subagents.md")]
pub mod subagents {}

#[doc = include_str!("guide/config.md")]
pub mod config {}

#[doc = include_str!("guide/rules.md")]
pub mod rules {}

#[doc = include_str!("guide/hooks.md")]
pub mod hooks {}

#[doc = include_str!("guide/cli.md")]
pub mod cli {}

#[doc = include_str!("guide/models.md")]
pub mod models {}

#[doc = include_str!("guide/acp.md")]
pub mod acp {}
#[doc = include_str!("guide/serve.md")]
pub mod serve {}
#[doc = include_str!("guide/mcp.md")]
pub mod mcp {}

#[doc = include_str!("guide/library.md")]
pub mod library {}

#[doc = include_str!("guide/stores.md")]
pub mod stores {}

#[doc = include_str!("guide/jail.md")]
pub mod jail {}

#[doc = include_str!("guide/testing.md")]
pub mod testing {}

#[doc = include_str!("guide/performance.md")]
pub mod performance {}

#[doc = include_str!("guide/layout.md")]
pub mod layout {}
