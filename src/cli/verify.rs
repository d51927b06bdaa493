//! `verify`: property-tests a mode config with the built-in tools and the tools `--tool` stubs.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use agent_controller::display::neutralize_line;
use agent_controller::store::{PendingListing, SessionRecord};
use agent_controller::testing::{Cause, Check, CheckError, CheckReport};
use agent_controller::tool::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput};
use agent_controller::{
    MemoryStore, ModeGraph, SessionStore, ToolRegistry, config::ConfigErrorKind,
    mode::RequireApproval, store::StoreError,
};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::cli::args::{StubSpec, VerifyArgs};
use crate::cli::check::{Diagnosis, counted, diagnose};
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::tools;

/// `verify`: the config's errors and warnings as `check` reports them (errors: exit 2, or 1 when
/// they only name tools the CLI lacks), then the testing kit's check of the merged config (its
/// layers, as every command reads them) with the built-in tools,
/// the `--tool` stubs and an in-memory store (so restarts are checked), its report and a closing
/// summary of what was checked and what was not; a divergence exits 7.
pub(crate) fn verify(args: VerifyArgs) -> Outcome {
    let tools = with_stubs(&args.tools)?;
    let Diagnosis {
        errors,
        warnings,
        layers,
    } = diagnose(&args.config, &tools)?;
    if !errors.is_empty() {
        if errors
            .iter()
            .any(|e| e.kind() != ConfigErrorKind::UnknownTool)
        {
            return Ok(Exit::Invalid);
        }
        let graph = crate::cli::setup::graph_of(&args.config).map_err(Failure::invalid)?;
        let unknown = unknown_tools(&graph, &tools);
        let flags: Vec<String> = unknown
            .iter()
            .map(|n| format!("--tool {}", neutralize_line(n)))
            .collect();
        note!(
            "the config names tools of its host: stub them with {} (add `:read-only` to one that \
             changes nothing)",
            flags.join(" ")
        );
        return Ok(Exit::RuntimeError);
    }
    // The config's rule tests, as `check` runs them: a failing one is an error (exit 2).
    let graph = crate::cli::setup::graph_of(&args.config).map_err(Failure::invalid)?;
    if !crate::cli::check::rule_tests_pass(&graph, tools.clone(), &args.config, Some(&layers))? {
        return Ok(Exit::Invalid);
    }
    if let Some(plant) = planted() {
        note!("{PLANT_ENV}: a planted bug ({plant:?}), a test seam of debug builds");
    }
    // The kit checks the merged config, the one every command runs.
    let mut check = Check::layers(layers);
    if let Some(cases) = args.cases {
        check = check.cases(cases);
    }
    if let Some(seed) = args.seed {
        check = check.seed(seed);
    }
    if let Some(file) = args.regressions {
        check = check.regressions(file);
    }
    let result = check.run(|setup| setup.builder().tools(tools.clone()).store(store()).build());
    let stubs: Vec<&str> = args.tools.iter().map(|s| s.name.as_str()).collect();
    // The config loaded for the check: its modes with a deadline, whose expiry the kit checks.
    let timed: Vec<String> = crate::cli::setup::graph_of(&args.config).map_or_else(
        |_| Vec::new(),
        |graph| {
            graph
                .ids()
                .map(|id| graph.mode(id))
                .filter(|mode| mode.approval_timeout().is_some())
                .map(|mode| mode.id().to_string())
                .collect()
        },
    );
    // Whether a mode lists a task tool: the kit drives them, and says so.
    let tasks = crate::cli::setup::graph_of(&args.config).is_ok_and(|graph| {
        graph.ids().any(|id| {
            graph.mode(id).available_tools().is_some_and(|list| {
                list.iter()
                    .any(|t| agent_controller::tool::tasks::is_task_tool(t))
            })
        })
    });
    // The modes with a quorum (`approvers` above 1 on the mode or on one of its rules), which
    // the kit models.
    let quorum: Vec<String> = crate::cli::setup::graph_of(&args.config).map_or_else(
        |_| Vec::new(),
        |graph| {
            graph
                .ids()
                .map(|id| graph.mode(id))
                .filter(|mode| {
                    mode.approvers() > 1
                        || mode
                            .rules()
                            .as_slice()
                            .iter()
                            .any(|r| r.needs_approvers() > 1)
                })
                .map(|mode| mode.id().to_string())
                .collect()
        },
    );
    let closing =
        |report: &CheckReport| summary(report, warnings.len(), &stubs, &timed, tasks, &quorum);
    match result {
        Ok(report) => {
            say!("{report}");
            say!("{}", closing(&report));
            Ok(Exit::Done)
        }
        Err(CheckError::Failed(report)) => {
            say!("{report}");
            say!("{}", closing(&report));
            Ok(Exit::Diverged)
        }
        Err(CheckError::Config(e)) => Err(Failure::invalid(e)),
        Err(e @ CheckError::Regressions { .. }) => Err(Failure::invalid(e)),
        Err(e) => Err(Failure::runtime(e)),
    }
}

/// The environment variable of `verify`'s test seam ([`planted`]).
pub(crate) const PLANT_ENV: &str = "AGENT_CONTROLLER_VERIFY_PLANT";

/// The session store each check's controller gets: a fresh in-memory one (so restarts are
/// checked), or in a debug build the planted one [`PLANT_ENV`] names.
fn store() -> Arc<dyn SessionStore> {
    let memory = Arc::new(MemoryStore::new());
    match planted() {
        Some(Plant::ForgetsSaves) => Arc::new(ForgetsSaves {
            inner: memory,
            first: Mutex::default(),
        }),
        None => memory,
    }
}

/// A bug a test can plant in the controller `verify` checks, to see the binary diverge (exit 7)
/// from outside: a test seam, not a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plant {
    /// The store keeps only each session's first save: a restored session is the new session.
    ForgetsSaves,
}

/// The plant [`PLANT_ENV`] names (`forgets-saves`), read only in a debug build (the one
/// `cargo test` runs): a test seam, so that a test can make the binary diverge, since a correct
/// crate gives no honest way to make `verify` diverge from outside (it checks the crate's own
/// controller, with the built-in tools and fixed stubs). A release build ignores it.
fn planted() -> Option<Plant> {
    if !cfg!(debug_assertions) {
        return None;
    }
    match std::env::var(PLANT_ENV).ok()?.as_str() {
        "forgets-saves" => Some(Plant::ForgetsSaves),
        _ => None,
    }
}

/// [`Plant::ForgetsSaves`]: every save after a session's first is accepted and dropped.
struct ForgetsSaves {
    inner: Arc<MemoryStore>,
    first: Mutex<HashSet<String>>,
}

#[async_trait]
impl SessionStore for ForgetsSaves {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.load(id).await
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        let first = self
            .first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.session_id.clone());
        if first {
            self.inner.save(record, expected).await
        } else {
            Ok(())
        }
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }

    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        self.inner.list_pending(now_ms).await
    }

    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
}

/// The built-in tools and a stub for each `--tool`; a name taken (by a built-in tool, another
/// stub or `submit_plan`) is a usage error (exit 2).
fn with_stubs(stubs: &[StubSpec]) -> Result<ToolRegistry, Failure> {
    let mut registry = tools();
    for stub in stubs {
        let access = if stub.read_only {
            ToolAccess::ReadOnly
        } else {
            ToolAccess::Writes
        };
        registry
            .register(Arc::new(Stub {
                name: stub.name.clone(),
                access,
            }))
            .map_err(|e| match e {
                ToolError::Duplicate(name) => Failure::invalid(format!(
                    "--tool {name}: a built-in tool or another --tool has this name"
                )),
                e => Failure::invalid(format!("--tool {}: {e}", stub.name)),
            })?;
    }
    Ok(registry)
}

/// The tools the modes of `graph` name (`availableTools`, `requireApproval`) that `tools` lacks,
/// each once, in the order of the config, for the `--tool` hint.
fn unknown_tools(graph: &ModeGraph, tools: &ToolRegistry) -> Vec<String> {
    let mut unknown: Vec<String> = Vec::new();
    for id in graph.ids() {
        let mode = graph.mode(id);
        let approval = match mode.require_approval() {
            RequireApproval::Tools(list) => list.as_slice(),
            _ => &[],
        };
        let listed = mode.available_tools().unwrap_or_default();
        for name in listed.iter().chain(approval) {
            if !tools.knows(name) && !unknown.iter().any(|u| **u == **name) {
                unknown.push(name.to_string());
            }
        }
    }
    unknown
}

/// What `verify` checked and what it did not, from the kit's report: two lines. `tasks`: a
/// mode lists a task tool (which the kit drives where nothing holds their calls); `quorum`:
/// the modes with `approvers` above 1 (on the mode or a rule).
fn summary(
    report: &CheckReport,
    warnings: usize,
    stubs: &[&str],
    timed: &[String],
    tasks: bool,
    quorum: &[String],
) -> String {
    let exploration = &report.exploration;
    let (states, bound) = if exploration.complete {
        (
            counted(exploration.states, "state"),
            "every reachable state".to_owned(),
        )
    } else {
        (
            format!("{} explored", counted(exploration.explored, "state")),
            format!(
                "up to the bound: {} more reached were not explored",
                exploration.states - exploration.explored
            ),
        )
    };
    let mut checked = format!(
        "checked: {} and {} ({bound}), {}/{} edges, {} (seed {}), restarts (an in-memory session \
         store)",
        states,
        counted(exploration.transitions, "transition"),
        report.edges.covered(),
        report.edges.total(),
        counted(report.cases as usize, "random case"),
        report.seed,
    );
    if !timed.is_empty() {
        checked.push_str(&format!(
            ", deadlines (the approvalTimeout of {}: time passing to just before and to each \
             deadline, the expiry of plans and waiting tool calls, decisions and restarts around \
             it)",
            quoted(timed)
        ));
    }
    let questions = covered_edges(report, Cause::is_question);
    if let Some((modes, causes)) = questions.as_ref().filter(|(_, c)| !c.is_empty()) {
        checked.push_str(&format!(
            ", questions (ask_user in {}: {}; answers that do not fit, stale pins and approvals \
             of a question refused)",
            quoted(modes),
            causes.join(", ")
        ));
    }
    let subagents = covered_edges(report, Cause::is_subagent);
    if let Some((modes, causes)) = subagents.as_ref().filter(|(_, c)| !c.is_empty()) {
        checked.push_str(&format!(
            ", subagents (subagent in {}: {}; the tools each child is offered, a forbidden type \
             and an empty task refused, a child's wait restored after a restart)",
            quoted(modes),
            causes.join(", ")
        ));
    }
    if tasks {
        checked.push_str(
            ", the task tools (a valid list, two tasks in progress, a repeated id, an unknown id, \
             an update that puts another task in progress, a completion, a check; and the list an \
             approved plan's numbered steps seed; calls held for approval are not made)",
        );
    }
    if !quorum.is_empty() {
        checked.push_str(&format!(
            ", quorum (approvers above 1 in {}: each approval by distinct identities, the same \
             identity twice, always-allow and edited plans refused, a hook's allow not counted)",
            quoted(quorum)
        ));
    }
    if warnings > 0 {
        checked.push_str(&format!(
            "; {} (above)",
            counted(warnings, "config warning")
        ));
    }
    let mut not = "not checked: side effects outside the tool registry and what a tool does on \
         its own"
        .to_owned();
    if timed.is_empty() {
        not.push_str(", deadlines (no mode has an approvalTimeout)");
    }
    match &questions {
        None => not.push_str(", questions (no mode offers ask_user)"),
        Some((_, causes)) if causes.is_empty() => {
            not.push_str(", questions (every question transition diverged: above)");
        }
        Some(_) => {}
    }
    match &subagents {
        None => not.push_str(", subagents (no mode offers subagent)"),
        Some((_, causes)) if causes.is_empty() => {
            not.push_str(", subagents (every subagent transition diverged: above)");
        }
        Some(_) => {}
    }
    if !stubs.is_empty() {
        not.push_str(&format!(
            ", the real {} (stubbed: each call returns a fixed result)",
            quoted(stubs)
        ));
    }
    format!("{checked}\n{not}")
}

/// The modes where the edge walk covered transitions of a kind (`kind`: questions, subagents),
/// and those transitions (each once, in walk order); `None` when the config has no edge of
/// the kind.
fn covered_edges(
    report: &CheckReport,
    kind: fn(Cause) -> bool,
) -> Option<(Vec<String>, Vec<&'static str>)> {
    let asked: Vec<_> = report
        .edges
        .edges
        .iter()
        .filter(|e| kind(e.cause))
        .collect();
    if asked.is_empty() {
        return None;
    }
    let (mut modes, mut causes) = (Vec::new(), Vec::new());
    for edge in asked {
        if report.edges.missed.iter().any(|(missed, _)| missed == edge) {
            continue;
        }
        if !modes.contains(&edge.from) {
            modes.push(edge.from.clone());
        }
        if !causes.contains(&edge.cause.as_str()) {
            causes.push(edge.cause.as_str());
        }
    }
    Some((modes, causes))
}

/// `` `a`, `b` `` (names neutralized for the terminal).
fn quoted(names: &[impl AsRef<str>]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", neutralize_line(n.as_ref())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A `--tool` stub: any arguments, a fixed result, the access it was given.
struct Stub {
    name: String,
    access: ToolAccess,
}

#[async_trait]
impl Tool for Stub {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> String {
        format!(
            "A stub of the host's `{}` tool (agent-controller verify).",
            self.name
        )
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    fn access(&self) -> ToolAccess {
        self.access
    }
    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        ToolOutput::ok(format!("`{}` stubbed by verify", self.name))
    }
}

#[cfg(test)]
mod tests {
    use agent_controller::testing::{
        Aspect, Counterexample, Divergence, EdgeReport, Exploration, Op,
    };

    use super::*;

    fn report(diverged: bool) -> CheckReport {
        CheckReport {
            config: "modes.toml".to_owned(),
            exploration: Exploration {
                states: 9,
                explored: 9,
                transitions: 178,
                counterexample: diverged.then(|| Counterexample {
                    start: "plan".to_owned(),
                    ops: vec![Op::Abort],
                    divergence: Divergence {
                        aspect: Aspect::Mode,
                        op: "abort".to_owned(),
                        expected: "plan".to_owned(),
                        actual: "build".to_owned(),
                    },
                    hooks: Default::default(),
                }),
                complete: true,
                scoped: 0,
                drifting: 0,
            },
            edges: EdgeReport {
                edges: Vec::new(),
                missed: Vec::new(),
            },
            cases: 4,
            seed: 1,
            counterexample: None,
            replays: true,
            failed_case: None,
            test: None,
        }
    }

    #[test]
    fn the_summary_says_what_was_checked_and_what_not() {
        let text = summary(
            &report(false),
            1,
            &["run_tests"],
            &["plan".to_owned()],
            false,
            &["build".to_owned()],
        );
        assert!(
            text.contains(", quorum (approvers above 1 in `build`: each approval by distinct"),
            "{text}"
        );
        assert!(
            text.starts_with(
                "checked: 9 states and 178 transitions (every reachable state), 0/0 edges, \
                 4 random cases (seed 1), restarts"
            ),
            "{text}"
        );
        assert!(text.contains("1 config warning"), "{text}");
        assert!(
            text.contains(", deadlines (the approvalTimeout of `plan`: time passing"),
            "{text}"
        );
        assert!(!text.contains("not checked: deadlines"), "{text}");
        let untimed = summary(&report(false), 0, &[], &[], false, &[]);
        assert!(!untimed.contains("quorum"), "{untimed}");
        assert!(
            untimed.contains("deadlines (no mode has an approvalTimeout)"),
            "{untimed}"
        );
        assert!(text.contains("the real `run_tests` (stubbed"), "{text}");
        assert!(!text.contains("task tools"), "{text}");
        let tasks = summary(&report(false), 0, &[], &[], true, &[]);
        assert!(
            tasks.contains(", the task tools (a valid list, two tasks in progress,"),
            "{tasks}"
        );
        assert!(!report(true).is_ok());
    }

    #[test]
    fn the_summary_names_the_question_transitions_it_covered() {
        use agent_controller::testing::{Cause, Edge, Miss};
        let edge = |cause| Edge {
            from: "build".to_owned(),
            cause,
            to: "build".to_owned(),
        };
        let mut asked = report(false);
        asked.edges.edges = vec![
            edge(Cause::Manual),
            edge(Cause::AnswerQuestion),
            edge(Cause::DeclineQuestion),
            edge(Cause::ExpireQuestion),
        ];
        asked.edges.missed = vec![(edge(Cause::ExpireQuestion), Miss::Unreachable)];
        let text = summary(&asked, 0, &[], &[], false, &[]);
        assert!(
            text.contains(
                ", questions (ask_user in `build`: answer_question, decline_question; answers \
                 that do not fit, stale pins and approvals of a question refused)"
            ),
            "{text}"
        );
        assert!(!text.contains("not checked: questions"), "{text}");
        let unasked = summary(&report(false), 0, &[], &[], false, &[]);
        assert!(
            unasked.contains(", questions (no mode offers ask_user)"),
            "{unasked}"
        );
    }

    #[test]
    fn the_summary_names_the_subagent_transitions_it_covered() {
        use agent_controller::testing::{Cause, Edge};
        let edge = |cause| Edge {
            from: "build".to_owned(),
            cause,
            to: "build".to_owned(),
        };
        let mut started = report(false);
        started.edges.edges = vec![
            edge(Cause::Manual),
            edge(Cause::SubagentAnswers),
            edge(Cause::ChildBesideTool),
        ];
        let text = summary(&started, 0, &[], &[], false, &[]);
        assert!(
            text.contains(", subagents (subagent in `build`: subagent_answers, child_beside_tool;"),
            "{text}"
        );
        assert!(!text.contains("not checked: subagents"), "{text}");
        let none = summary(&report(false), 0, &[], &[], false, &[]);
        assert!(
            none.contains(", subagents (no mode offers subagent)"),
            "{none}"
        );
    }

    #[test]
    fn a_divergence_has_its_own_exit_status() {
        assert_eq!(Exit::Diverged.code(), 7);
        assert!(
            [
                Exit::Done,
                Exit::RuntimeError,
                Exit::Invalid,
                Exit::NotApproved,
                Exit::Pending,
                Exit::Refused,
                Exit::Unreadable
            ]
            .iter()
            .all(|e| e.code() != 7)
        );
    }
}
