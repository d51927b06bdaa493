//! The integration tests, as one test crate: one binary to build and link instead of one per
//! file, which matters on a 2-core CI. Each module is one area; run one with
//! `cargo test --all-features --test it store::` (a module path is a test-name filter).
//!
//! Two files stay binaries of their own, because they touch state of the whole process:
//! `tests/dot_workspace.rs` changes the current directory, and `tests/spans.rs` installs a
//! `tracing` subscriber, whose per-callsite interest cache other tests' threads would share.

mod common;

mod acp;
mod acp_codes;
mod acp_input;
mod acp_questions;
mod acp_sdk;
mod acp_tasks;
mod allowance_origin;
mod allowances;
mod anthropic;
mod approval_feedback;
mod approved_calls;
mod approver_sees;
mod ask_user;
mod blocking;
mod builders;
mod cancel;
mod chat_templates;
mod cli;
mod cli_allowances;
mod cli_explain;
mod cli_model_choice;
mod cli_plan_comments;
mod cli_plan_steps;
mod cli_prompt_switch;
mod cli_questions;
mod cli_rules;
mod cli_session_config;
mod cli_sessions;
mod cli_subagents;
mod cli_switch;
mod cli_tools;
mod cli_trial;
mod cli_workspace;
mod command_hooks;
mod config;
mod config_change;
mod config_tools;
mod deadlines;
mod decision_schema;
mod decisions;
mod diagram;
mod docs;
mod editor;
mod events;
mod explain;
mod handover;
mod hooks;
mod hostile;
mod import;
mod jail;
mod kit_plants;
mod mcp;
mod mcp_config;
mod model_choice;
mod model_input;
mod openai;
mod pending_pages;
mod plan_comments;
mod plan_report;
mod plan_scope;
mod plan_steps;
mod postgres;
mod protected;
mod result_order;
mod rules;
mod schema;
mod serve_api;
mod serve_page;
mod session;
mod session_handle;
mod show;
mod store;
mod store_conformance;
mod subagent_config;
mod subagent_waits;
mod subagents;
mod submit_plan;
mod tasks;
mod terminal;
mod tool_access;
mod tool_approval;
mod tool_suspend;
mod transitions;
mod trust_trial;
mod two_processes;
mod usage;
mod workspace;
