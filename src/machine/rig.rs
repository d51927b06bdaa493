//! The rules on a bench, for the core's unit tests: a three-mode graph (`plan` hands over to
//! `build` or `build-auto`; `build` asks before `write_file`), what each mode offers, a session
//! state, a clock the test sets, and the one entry point ([`Rig::handle`]). No async, no I/O:
//! the unit tests run in milliseconds, so `cargo mutants` over the core fits in a session.

// All of it is the core's tests' (the module is declared under `#[cfg(test)]`): kept in a
// `tests` module so that the import-cycle check of `src/lib.rs` reads it as test code (it parses
// its modes with `crate::config`, which no rule of the core may import).
pub(crate) use self::tests::*;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use crate::event::Event;
    use crate::machine::change::{Change, Config, LeaseTerms};
    use crate::machine::error::SessionError;
    use crate::machine::input::Input;
    use crate::machine::next::Next;
    use crate::machine::state::State;
    use crate::mode::{ModeGraph, ModeId, ModeRuntime};
    use crate::model::{Message, ModelResponse};
    use crate::tool::{ToolCall, ToolSpec};
    use crate::workspace::{DirectoryIdentity, WorkspaceRecord};

    const MODES: &str = include_str!("rig.toml");

    /// 2026-12-01T18:00:00Z.
    pub(crate) const T0: u64 = 1_796_148_000_000;

    /// A session's rules and state, driven input by input.
    pub(crate) struct Rig {
        pub(crate) graph: ModeGraph,
        runtimes: Vec<ModeRuntime>,
        id: Arc<str>,
        pub(crate) workspace: WorkspaceRecord,
        /// The session's state, as the inputs leave it.
        pub(crate) state: State,
        /// Every event emitted so far, in order.
        pub(crate) events: Vec<Event>,
        /// Now, by the test's clock.
        pub(crate) now_ms: u64,
        pub(crate) max_revisions: usize,
        /// Whether the session has a store (then runs take leases of this length).
        pub(crate) lease: Option<Duration>,
        /// The id of the controller's own model, if the host names it.
        pub(crate) own_model: Option<String>,
    }

    impl Rig {
        /// A session in mode `plan`, at [`T0`], without a store.
        pub(crate) fn new() -> Self {
            let graph = crate::config::parse(MODES, "rig.toml").expect("the rig's modes parse");
            let plan = graph.get("plan").expect("plan");
            let mut rig = Self::with_graph(graph);
            rig.state = State::new(plan);
            rig
        }

        /// A session of `graph` in its default mode, at [`T0`], without a store.
        pub(crate) fn with_graph(graph: ModeGraph) -> Self {
            let runtimes = graph.ids().map(|id| runtime(&graph, id)).collect();
            let start = graph.default_mode_id();
            Self {
                graph,
                runtimes,
                id: Arc::from("s1"),
                workspace: WorkspaceRecord {
                    path: "/work/rig".into(),
                    identity: DirectoryIdentity {
                        device: None,
                        inode: None,
                        created_ns: None,
                    },
                },
                state: State::new(start),
                events: Vec::new(),
                now_ms: T0,
                max_revisions: 2,
                lease: None,
                own_model: None,
            }
        }

        /// The mode with id `id`.
        pub(crate) fn mode(&self, id: &str) -> ModeId {
            self.graph.get(id).expect("a mode of the rig")
        }

        /// The id of the session's mode.
        pub(crate) fn mode_id(&self) -> &str {
            self.graph.mode(self.state.mode).id()
        }

        /// Hands `input` to the rules at `now_ms`: the one entry point, as the driver calls it.
        pub(crate) fn handle(&mut self, input: Input) -> Result<Next, SessionError> {
            let owner = "rig-owner";
            let mut change = Change {
                config: Config {
                    graph: &self.graph,
                    runtimes: &self.runtimes,
                    max_revisions: self.max_revisions,
                    lease: self.lease.map(|duration| LeaseTerms { owner, duration }),
                    own_model: self.own_model.as_deref(),
                    child: false,
                },
                now_ms: self.now_ms,
                id: &self.id,
                workspace: crate::allowance::WorkspaceScope {
                    workspace: &self.workspace,
                    fingerprint: "rig-fingerprint",
                },
                state: &mut self.state,
                events: &mut self.events,
            };
            change.handle(input)
        }

        /// The kinds of the events emitted since the last call (`agent_start`, ...), and forgets
        /// them.
        pub(crate) fn take_kinds(&mut self) -> Vec<&'static str> {
            self.events.drain(..).map(|e| e.kind()).collect()
        }

        /// Starts a run with a user message; returns its id.
        pub(crate) fn start(&mut self, text: &str) -> Arc<str> {
            match self.handle(Input::UserMessage(text.to_owned())) {
                Ok(Next::CallModel(run_id)) => run_id,
                other => panic!("a user message starts a run, got {other:?}"),
            }
        }

        /// The model replies in `run_id` with `text` and `calls`.
        pub(crate) fn reply(
            &mut self,
            run_id: &Arc<str>,
            text: &str,
            calls: Vec<ToolCall>,
        ) -> Next {
            let reply = ModelResponse {
                text: text.to_owned(),
                tool_calls: calls,
                finish_reason: None,
                usage: None,
            };
            let input = Input::ModelReply {
                run_id: run_id.clone(),
                reply,
            };
            self.handle(input).expect("a model reply is never refused")
        }

        /// The result `content` of the `read_file` call `call_id` of run `run_id`.
        pub(crate) fn result(&mut self, run_id: &Arc<str>, call_id: &str, content: &str) {
            let result = Input::ToolResult {
                call: crate::machine::call::CallRef::new(run_id.clone(), call_id, "read_file"),
                output: crate::tool::ToolOutput::ok(content),
                decision: None,
            };
            self.handle(result).expect("a result is never refused");
        }

        /// The results in the conversation, as `(tool call id, content)`, in order.
        pub(crate) fn results(&self) -> Vec<(String, String)> {
            self.state
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::Tool {
                        tool_call_id,
                        content,
                        ..
                    } => Some((tool_call_id.clone(), content.clone())),
                    _ => None,
                })
                .collect()
        }
    }

    /// A call of `name` with id `id` and `args`.
    pub(crate) fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            args,
        }
    }

    /// Calls of `read_file` with ids `ids`.
    pub(crate) fn reads(ids: &[&str]) -> Vec<ToolCall> {
        ids.iter()
            .map(|id| call(id, "read_file", json!({})))
            .collect()
    }

    /// What mode `id` offers: a spec per available tool, its name and id.
    pub(crate) fn runtime(graph: &ModeGraph, id: ModeId) -> ModeRuntime {
        let mode = graph.mode(id);
        let names: Vec<Arc<str>> = mode.available_tools().unwrap_or_default().to_vec();
        ModeRuntime {
            system_prompt: String::new(),
            specs: names
                .iter()
                .map(|name| ToolSpec {
                    name: name.clone(),
                    description: String::new(),
                    input_schema: json!({ "type": "object" }),
                    access: Default::default(),
                })
                .collect(),
            tool_list: names.join(", "),
            name: mode.name().to_owned(),
            id: mode.id_arc().clone(),
        }
    }
}
