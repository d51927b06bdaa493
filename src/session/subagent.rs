//! Running `subagent` calls as child runs ([`crate::subagent`]): the driver's part. A child is
//! a session of its own (its own transcript) sharing the parent's workspace, jail, tools and
//! store-less state, whose view of the parent's current mode is narrowed here, in one place:
//!
//! - its tools: those its type lists *and* the parent's mode offers, never the task tools,
//!   `submit_plan`, or `subagent` at the depth limit; from a planning mode only read-only ones;
//! - its rules: the parent mode's `requireApproval` and rules, with the type's own on top (its
//!   `deny` and `ask` rules, and its `requireApproval`, which can only add waits);
//! - its allowances: the parent's, as they stand when it starts;
//! - its model: the parent's, asked for the type's `defaultModelId` when it names one;
//! - its extensions: the parent's (the host's state for the session the child runs in), shared.
//!
//! The rulings themselves are the session's ([`Session::ruling_of`]): a child's call is ruled
//! by the same code as its parent's, in the narrowed mode. A child's call that waits (for
//! approval or an answer) suspends the child, whose waiting decisions then wait in the
//! parent's session, naming the child ([`crate::subagent::SubagentOrigin`]): once they are
//! decided the child carries on ([`Session::resume_child`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::{Decision, PendingDecision};
use super::{RunOutcome, Session, SessionOptions, Shared};
use crate::event::Event;
use crate::event::{DecisionOutcome, SubagentOutcome};
use crate::extensions::Extensions;
use crate::machine::input::Input;
use crate::machine::state::WaitingChild;
use crate::mode::subagent::SubagentType;
use crate::mode::{Mode, ModeId, RequireApproval};
use crate::model::LanguageModel;
use crate::plan_report::PlanWrite;
use crate::rules::{Matcher, Rule, RuleAction, Rules};
use crate::subagent::{MAX_PER_REPLY, SUBAGENT};
use crate::tool::ToolAccess;
use crate::tool::ToolOutput;

/// A child ready to start: everything it needs, owned, so it runs beside its siblings.
struct Child {
    /// The parent's call's position in its reply.
    index: usize,
    tool_call_id: String,
    agent_type: String,
    child_id: Arc<str>,
    shared: Arc<Shared>,
    mode: ModeId,
    model: Arc<dyn LanguageModel>,
    task: String,
    allowances: Vec<crate::allowance::Allowance>,
    workspace_allowances: Vec<crate::allowance::Allowance>,
    /// The parent's extensions: the host's state for the session, which the child runs in.
    extensions: Extensions,
    /// The child's copy of the parent's plan ledger, if any (its writes are the parent's).
    plan_ledger: Option<crate::plan_report::PlanLedger>,
    /// Where the child leaves the writes it noted as it ends.
    plan_writes: ChildPlanWrites,
}

/// The writes children noted in their copies of the approved plan's ledger as they ended,
/// each with the child's id, for the parent to take ([`Session::note_child_plan_writes`]).
pub(crate) type ChildPlanWrites = Arc<Mutex<Vec<(Arc<str>, Vec<PlanWrite>)>>>;

type Running = Pin<Box<dyn Future<Output = (usize, ChildEnd)> + Send>>;

/// How a child's run stands when it returns: done (its result for the parent's call), or
/// waiting for the user (its state, kept by the parent until its calls are decided).
pub(crate) enum ChildEnd {
    /// The child ended: its final text, or an error result that says why there is none.
    Done(ToolOutput),
    /// The child waits for the user.
    Waits(Box<WaitingChild>),
}

/// The results of a reply's `subagent` calls, each with its call's position in the reply, as a
/// future of its own.
type Batch<'a> = Pin<Box<dyn Future<Output = Vec<(usize, ToolOutput)>> + Send + 'a>>;

impl Session {
    /// Runs the `subagent` calls at `indexes` of the reply at `at` (in the model's order), at
    /// most the controller's bound at once, and returns each call's result by its index. A
    /// call that cannot start (an unknown or forbidden type, bad input, past the per-reply cap,
    /// past the depth limit) gets an error result at once; the others run as children. Each
    /// child's events reach the parent's subscribers wrapped (`subagent_event`), between its
    /// `subagent_started` and `subagent_ended`.
    ///
    /// Boxed as a `Send` future: a child's run awaits this again for its own children, and a
    /// future type that contains itself needs a name for its `Send`.
    pub(crate) fn run_subagents<'a>(
        &'a self,
        run_id: &'a Arc<str>,
        at: usize,
        indexes: &'a [usize],
    ) -> Batch<'a> {
        Box::pin(self.run_subagents_now(run_id, at, indexes))
    }

    async fn run_subagents_now(
        &self,
        run_id: &Arc<str>,
        at: usize,
        indexes: &[usize],
    ) -> Vec<(usize, ToolOutput)> {
        let parent_model = self.parent_model();
        // Each result goes to the session as it comes (`Session::subagent_results`): a run
        // dropped while some children still run keeps those of the children that finished.
        let finished = |output: (usize, ToolOutput)| {
            self.subagent_results
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(output);
        };
        self.subagent_results
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        // A child kept by a run that was dropped before it suspended is not this batch's.
        self.waiting_children
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let mut children: Vec<Child> = Vec::new();
        for &index in indexes {
            let prepared = match &parent_model {
                Ok((model, chosen)) => self.prepare_child(run_id, at, index, model, *chosen),
                Err(error) => Err(format!(
                    "the parent's model could not be built for the subagent: {error}"
                )),
            };
            match prepared {
                Ok(child) => children.push(child),
                Err(why) => finished((
                    index,
                    ToolOutput::error(format!("subagent refused: {why}. Nothing was started.")),
                )),
            }
        }
        let semaphore = Arc::new(Semaphore::new(self.shared.subagent_limits.concurrency));
        let (events, mut received) = mpsc::unbounded_channel::<Event>();
        let mut running: Vec<Option<Running>> = children
            .into_iter()
            .map(|child| {
                let run = run_child(
                    child,
                    semaphore.clone(),
                    events.clone(),
                    self.run_token.clone(),
                    self.id.clone(),
                    run_id.clone(),
                );
                Some(Box::pin(run) as Running)
            })
            .collect();
        drop(events);
        let this = self;
        // The children are polled here, in the parent's task (no task is spawned: a dropped
        // run drops its children with it), and their events delivered as they come.
        std::future::poll_fn(|cx| {
            for slot in running.iter_mut() {
                if let Some(child) = slot
                    && let Poll::Ready((index, end)) = child.as_mut().poll(cx)
                {
                    finished((index, this.settled(index, end)));
                    *slot = None;
                }
            }
            while let Ok(event) = received.try_recv() {
                this.deliver_shared(&event);
            }
            if running.iter().all(Option::is_none) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        let mut outputs = std::mem::take(
            &mut *self
                .subagent_results
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        outputs.sort_by_key(|(index, _)| *index);
        outputs
    }

    /// The model the parent's run uses now, and whether it was chosen at an approval (as
    /// [`Session::mode_model`] finds it, without keeping one it builds).
    fn parent_model(&self) -> Result<(Arc<dyn LanguageModel>, bool), String> {
        let Some(id) = &self.state.model_id else {
            let model = self.model.clone();
            return Ok((model.unwrap_or_else(|| self.shared.model.clone()), false));
        };
        if let Some((built, model)) = &self.chosen_model
            && built == id
        {
            return Ok((model.clone(), true));
        }
        self.build_model(id)
            .map(|model| (model, true))
            .map_err(|e| e.to_string())
    }

    /// The child for the `subagent` call at `index` of the reply at `at`, or why it cannot
    /// start.
    fn prepare_child(
        &self,
        run_id: &Arc<str>,
        at: usize,
        index: usize,
        parent_model: &Arc<dyn LanguageModel>,
        chosen: bool,
    ) -> Result<Child, String> {
        let call = self
            .state
            .tool_call(at, index)
            .ok_or_else(|| "the call is not in the reply".to_owned())?;
        let ordinal = (0..index)
            .filter_map(|i| self.state.tool_call(at, i))
            .filter(|c| c.name == SUBAGENT)
            .count();
        if ordinal >= MAX_PER_REPLY {
            return Err(format!(
                "at most {MAX_PER_REPLY} subagent calls of one reply start, and this is call {} of them: start fewer at once",
                ordinal + 1
            ));
        }
        let limits = self.shared.subagent_limits;
        if self.shared.depth >= limits.depth {
            return Err(format!(
                "subagents nest at most {} deep here, and this run is at depth {}",
                limits.depth, self.shared.depth
            ));
        }
        let input = crate::tool::subagent::input(&call.args)?;
        let graph = &self.shared.graph;
        let mode = self.state.mode;
        let allowed = graph.subagents_of(mode);
        let Some(kind) = allowed.iter().find(|t| t.id() == input.agent_type) else {
            let known: Vec<String> = allowed.iter().map(|t| format!("`{}`", t.id())).collect();
            let why = if graph.subagent(&input.agent_type).is_some() {
                "which this mode may not start"
            } else {
                "which names no subagent type"
            };
            return Err(format!(
                "agentType `{}` is refused, {why} (the types this mode may start: {})",
                crate::display::neutralize_line_within(&input.agent_type, 100),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        let child_id: Arc<str> = Arc::from(format!("{}.{run_id}.sub{at}_{index}", self.id));
        let shared = self.child_shared(kind, chosen);
        Ok(Child {
            index,
            tool_call_id: call.id.clone(),
            agent_type: kind.id().to_owned(),
            child_id,
            shared: Arc::new(shared),
            mode,
            model: parent_model.clone(),
            task: input.task,
            allowances: self.state.allowances.clone(),
            workspace_allowances: self.state.workspace_allowances.clone(),
            extensions: self.extensions.clone(),
            plan_ledger: self.state.child_plan_ledger(),
            plan_writes: self.child_plan_writes.clone(),
        })
    }

    /// What a child of type `kind` shares: the parent's, with the parent's current mode
    /// narrowed to what the child may do (the module's rules), no store, and the child's
    /// limits. `chosen`: the parent's model was chosen at an approval (its requests then name
    /// no mode default).
    fn child_shared(&self, kind: &SubagentType, chosen: bool) -> Shared {
        let parent = &self.shared;
        let id = self.state.mode;
        let parent_mode = parent.graph.mode(id);
        let depth = parent.depth + 1;
        let mut runtime = parent.runtime(id).clone();
        runtime.specs.retain(|spec| {
            let name = &*spec.name;
            kind.lists(name)
                && name != crate::tool::SUBMIT_PLAN
                && !crate::tool::tasks::is_task_tool(name)
                && (name != SUBAGENT || depth < parent.subagent_limits.depth)
                && (!parent_mode.is_planning() || spec.access == ToolAccess::ReadOnly)
        });
        runtime.tool_list = if runtime.specs.is_empty() {
            "none".to_owned()
        } else {
            runtime
                .specs
                .iter()
                .map(|s| &*s.name)
                .collect::<Vec<_>>()
                .join(", ")
        };
        runtime.system_prompt = child_prompt(kind, parent_mode, &runtime.tool_list);
        let mode = child_mode(parent_mode, kind, &runtime, chosen);
        let mut runtimes = parent.runtimes.clone();
        if let Some(slot) = runtimes.get_mut(id.index()) {
            *slot = runtime;
        }
        Shared {
            graph: parent.graph.with_mode(id, mode),
            tools: parent.tools.clone(),
            model: parent.model.clone(),
            workspace: parent.workspace.clone(),
            workspace_named: parent.workspace_named,
            plans_dir: parent.plans_dir.clone(),
            max_steps: parent.subagent_limits.max_steps,
            max_revisions: parent.max_revisions,
            store: None,
            fingerprint: parent.fingerprint.clone(),
            lease_owner: parent.lease_owner.clone(),
            lease_duration: parent.lease_duration,
            protected_paths: parent.protected_paths.clone(),
            runtimes,
            clock: parent.clock.clone(),
            model_chooser: parent.model_chooser.clone(),
            model_id: parent.model_id.clone(),
            models: parent.models.clone(),
            recorded_config: std::sync::OnceLock::new(),
            task_tools: Vec::new(),
            subagent_tool: parent.subagent_tool,
            subagent_limits: parent.subagent_limits,
            depth,
            // A child's events reach the controller's receivers wrapped in its parent's
            // `subagent_event`.
            events: None,
            // A child's calls are a hook's as much as its parent's.
            hooks: parent.hooks.clone(),
            reviewers: parent.reviewers.clone(),
            // A child's graph is its parent's mode narrowed, fixed when it starts.
            managed_watch: None,
        }
    }
}

/// The parent's mode as a child of `kind` sees it: the parent's `requireApproval` and rules
/// with the type's on top (never an `allow` of the type's: it would loosen what the parent
/// asks for), the child's tools as its list, the model the child asks for.
fn child_mode(
    parent: &Mode,
    kind: &SubagentType,
    runtime: &crate::mode::ModeRuntime,
    chosen: bool,
) -> Mode {
    let mut mode = parent.clone();
    // The type's own rules keep their numbers in its list: a record names the type's rule N.
    let own = kind
        .rules()
        .as_slice()
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule.action() != RuleAction::Allow)
        .map(|(i, rule)| (i + 1, rule.clone()));
    // The type's `requireApproval` only adds waits: each tool it names gets an `ask` rule on
    // every call, which outranks a parent's `allow` rule (and, as every `ask` rule, holds
    // against allowances), where a merged `requireApproval` would be loosened by them.
    let waits: Vec<Arc<str>> = match &kind.require_approval {
        RequireApproval::None => Vec::new(),
        RequireApproval::All => runtime.specs.iter().map(|s| s.name.clone()).collect(),
        RequireApproval::Tools(tools) => tools.clone(),
    };
    let waits = waits
        .into_iter()
        .map(|tool| Rule::new(tool, Matcher::Any, RuleAction::Ask));
    mode.rules = Rules::layered(parent.rules(), kind.id(), own, waits);
    mode.require_approval = match (&parent.require_approval, &kind.require_approval) {
        (RequireApproval::All, _) | (_, RequireApproval::All) => RequireApproval::All,
        (RequireApproval::None, other) | (other, RequireApproval::None) => other.clone(),
        (RequireApproval::Tools(a), RequireApproval::Tools(b)) => {
            let mut tools = a.clone();
            tools.extend(b.iter().filter(|t| !a.contains(t)).cloned());
            RequireApproval::Tools(tools)
        }
    };
    mode.available_tools = Some(runtime.specs.iter().map(|s| s.name.clone()).collect());
    // A model chosen at an approval is the user's choice: the child keeps it unless its type
    // names its own.
    mode.default_model_id = kind.default_model_id().map(str::to_owned).or(if chosen {
        None
    } else {
        parent.default_model_id.clone()
    });
    mode
}

/// A child's system prompt: who it is, its type's instructions, its tools.
fn child_prompt(kind: &SubagentType, parent: &Mode, tools: &str) -> String {
    let mut prompt = format!(
        "You are a subagent of type `{}` ({}), started by an agent in its {} mode for one task. Work on the task with your tools; your final answer is all the agent reads, so make it complete.",
        kind.id(),
        kind.name(),
        parent.name()
    );
    if parent.is_planning() {
        prompt.push_str(" You may not change any file.");
    }
    if !kind.instructions().is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(kind.instructions());
    }
    prompt.push_str(&format!("\n\nYour tools: {tools}."));
    prompt
}

/// Runs one child to its end, in its turn (`semaphore`), and gives the parent's call its
/// result: the child's final text, or an error result saying why there is none.
async fn run_child(
    child: Child,
    semaphore: Arc<Semaphore>,
    events: mpsc::UnboundedSender<Event>,
    token: CancellationToken,
    session_id: Arc<str>,
    run_id: Arc<str>,
) -> (usize, ChildEnd) {
    let Child {
        index,
        tool_call_id,
        agent_type,
        child_id,
        shared,
        mode,
        model,
        task,
        allowances,
        workspace_allowances,
        extensions,
        plan_ledger,
        plan_writes,
    } = child;
    let _turn = token.run_until_cancelled(semaphore.acquire_owned()).await;
    let ended = |outcome: SubagentOutcome| Event::SubagentEnded {
        session_id: session_id.clone(),
        run_id: run_id.clone(),
        tool_call_id: tool_call_id.clone(),
        agent_type: agent_type.clone(),
        child_id: child_id.clone(),
        outcome,
    };
    if token.is_cancelled() {
        return (
            index,
            ChildEnd::Done(ToolOutput::error(
                "Cancelled: the run was cancelled before the subagent started.",
            )),
        );
    }
    let _ = events.send(Event::SubagentStarted {
        session_id: session_id.clone(),
        run_id: run_id.clone(),
        tool_call_id: tool_call_id.clone(),
        agent_type: agent_type.clone(),
        child_id: child_id.clone(),
    });
    let wrap = {
        let (events, session_id, tool_call_id, child_id) = (
            events.clone(),
            session_id.clone(),
            tool_call_id.clone(),
            child_id.clone(),
        );
        move |event: &Event| {
            let _ = events.send(Event::SubagentEvent {
                session_id: session_id.clone(),
                tool_call_id: tool_call_id.clone(),
                child_id: child_id.clone(),
                event: Box::new(event.clone()),
            });
        }
    };
    let mut options = SessionOptions::new().model(model).on_event(wrap);
    options.extensions = extensions;
    let started = Session::start(shared, child_id.clone(), mode, options).await;
    let mut session = match started {
        Ok(session) => session,
        Err(error) => {
            let _ = events.send(ended(SubagentOutcome::Failed));
            return (
                index,
                ChildEnd::Done(ToolOutput::error(format!(
                    "The subagent `{agent_type}` could not start: {error}"
                ))),
            );
        }
    };
    session.state.allowances = allowances;
    session.state.workspace_allowances = workspace_allowances;
    // Its writes are bound as the parent's: noted in a copy of the parent's ledger.
    session.state.plan_ledger = plan_ledger;
    let mode_id = session.mode_arc();
    session.state.refresh_allowed(&mode_id);
    let outcome = token.run_until_cancelled(session.send_message(task)).await;
    let called = (tool_call_id.clone(), Arc::from(agent_type.as_str()));
    let (end, outcome) = child_end(session, outcome, called.0, called.1, &plan_writes).await;
    if let ChildEnd::Done(_) = &end {
        let _ = events.send(ended(outcome));
    }
    (index, end)
}

/// What the child's run `outcome` (`None`: cancelled) leaves the parent's call with: the
/// child's final text, an error result that says why there is none, or, when its calls wait
/// for the user, the child itself (started by the parent's call `tool_call_id`), with the
/// `subagent_ended` outcome of a child that ended. A child that ended leaves the writes it
/// noted in its copy of the plan ledger in `plan_writes`, for the parent's ledger.
async fn child_end(
    mut session: Session,
    outcome: Option<Result<RunOutcome, super::SessionError>>,
    tool_call_id: String,
    agent_type: Arc<str>,
    plan_writes: &ChildPlanWrites,
) -> (ChildEnd, SubagentOutcome) {
    let child_id = session.id.clone();
    let (ended, output) = match outcome {
        None | Some(Ok(RunOutcome::Aborted { .. })) => (
            SubagentOutcome::Aborted,
            ToolOutput::error(format!(
                "Cancelled: the subagent `{agent_type}` ({child_id}) was stopped as the run was cancelled."
            )),
        ),
        Some(Ok(RunOutcome::Completed { text, .. })) => (
            SubagentOutcome::Completed,
            ToolOutput::ok(if text.trim().is_empty() {
                format!("The subagent `{agent_type}` finished without a final answer.")
            } else {
                text
            }),
        ),
        Some(Ok(RunOutcome::Failed { error, .. })) => (
            SubagentOutcome::Failed,
            ToolOutput::error(format!(
                "The subagent `{agent_type}` ({child_id}) failed: {error}"
            )),
        ),
        Some(Ok(RunOutcome::ToolCallsSuspended { .. } | RunOutcome::AwaitingAnswer { .. })) => {
            // Its calls wait for the user: they reach the user as the parent's decisions.
            let waits = WaitingChild {
                tool_call_id,
                agent_type,
                child_id,
                state: Box::new(session.state.clone()),
            };
            return (ChildEnd::Waits(Box::new(waits)), SubagentOutcome::Refused);
        }
        Some(Ok(RunOutcome::Suspended { .. })) => {
            // A child has no `submit_plan`; should one wait on a plan, it ends there.
            let _ = session.abort().await;
            (
                SubagentOutcome::Refused,
                ToolOutput::error(format!(
                    "The subagent `{agent_type}` ({child_id}) was ended: a subagent cannot submit a plan."
                )),
            )
        }
        Some(Err(error)) => (
            SubagentOutcome::Failed,
            ToolOutput::error(format!(
                "The subagent `{agent_type}` ({child_id}) failed: {error}"
            )),
        ),
    };
    if let Some(ledger) = session.state.plan_ledger.take()
        && !ledger.writes.is_empty()
    {
        plan_writes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((child_id, ledger.writes));
    }
    (ChildEnd::Done(output), ended)
}

/// The decision the user took on `pending`, a child's call decided in its parent's session,
/// as the child takes it: approved or rejected with the same feedback, or the same answer, by
/// the same person. `None` while it waits.
fn replayed(pending: &PendingDecision) -> Option<Decision> {
    let record = pending.decision()?;
    let feedback = match pending {
        PendingDecision::ToolCall(call) => call.feedback().map(str::to_owned),
        PendingDecision::Suspension(suspended) => suspended.feedback().map(str::to_owned),
        _ => None,
    };
    let decision = match record.outcome? {
        DecisionOutcome::Approved => match feedback {
            Some(feedback) => Decision::approve_with(feedback),
            None => Decision::approve(),
        },
        DecisionOutcome::Answered => Decision::answer(pending.as_suspension()?.answer()?.clone()),
        _ => match feedback {
            Some(feedback) => Decision::reject_with(feedback),
            None => Decision::reject(),
        },
    };
    Some(match &record.decided_by {
        Some(by) => decision.decided_by(by.clone()),
        None => decision,
    })
}

impl Session {
    /// The result a settled child's call is handed over with: its own when it ended; when it
    /// waits, the child is kept for the suspension ([`Session::waiting_children`]) and the
    /// result is the one the call keeps should the run stop before it suspends.
    fn settled(&self, index: usize, end: ChildEnd) -> ToolOutput {
        match end {
            ChildEnd::Done(output) => output,
            ChildEnd::Waits(child) => {
                let output = ToolOutput::error(format!(
                    "Cancelled: the subagent `{}` ({}) waited for the user when the run stopped; its waiting calls were not approved.",
                    child.agent_type, child.child_id
                ));
                self.waiting_children
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((index, *child));
                output
            }
        }
    }

    /// The child of the `subagent` call at `index` of the running reply, if it waits for the
    /// user (taken: the run suspends on it).
    pub(crate) fn take_waiting_child(&self, index: usize) -> Option<WaitingChild> {
        let mut waiting = self
            .waiting_children
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = waiting.iter().position(|(i, _)| *i == index)?;
        Some(waiting.remove(at).1)
    }

    /// Carries `child` on with the decisions `decided` the user took on its waiting calls:
    /// each goes to the child by its id there; the last carries its run on. Returns how it
    /// ended, or the child again when it waits once more.
    pub(crate) async fn resume_child(
        &self,
        run_id: &Arc<str>,
        child: WaitingChild,
        decided: Vec<PendingDecision>,
    ) -> ChildEnd {
        let WaitingChild {
            tool_call_id,
            agent_type,
            child_id,
            state,
        } = child;
        let Some(kind) = self.shared.graph.subagent(&agent_type) else {
            return ChildEnd::Done(ToolOutput::error(format!(
                "The subagent `{agent_type}` ({child_id}) could not carry on: the config no longer has its type."
            )));
        };
        let (model, chosen) = match self.parent_model() {
            Ok(found) => found,
            Err(error) => {
                return ChildEnd::Done(ToolOutput::error(format!(
                    "The subagent `{agent_type}` ({child_id}) could not carry on: the parent's model could not be built: {error}"
                )));
            }
        };
        let shared = Arc::new(self.child_shared(kind, chosen));
        let (events, mut received) = mpsc::unbounded_channel::<Event>();
        let wrap = {
            let (events, session_id, tool_call_id, child_id) = (
                events.clone(),
                self.id.clone(),
                tool_call_id.clone(),
                child_id.clone(),
            );
            move |event: &Event| {
                let _ = events.send(Event::SubagentEvent {
                    session_id: session_id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    child_id: child_id.clone(),
                    event: Box::new(event.clone()),
                });
            }
        };
        let mut options = SessionOptions::new().model(model).on_event(wrap);
        options.extensions = self.extensions.clone();
        let record = self.child_record(&child_id, &state);
        let mut session = match Session::from_record(shared, record, options) {
            Ok(session) => session,
            Err(error) => {
                return ChildEnd::Done(ToolOutput::error(format!(
                    "The subagent `{agent_type}` ({child_id}) could not carry on: {error}"
                )));
            }
        };
        // The parent's allowances as they stand now (an allowance the user gave at one of the
        // child's calls among them).
        session.state.allowances = self.state.allowances.clone();
        session.state.workspace_allowances = self.state.workspace_allowances.clone();
        let mode_id = session.mode_arc();
        session.state.refresh_allowed(&mode_id);
        let mut outcome = None;
        for pending in &decided {
            let (Some(origin), Some(decision)) = (pending.subagent(), replayed(pending)) else {
                continue;
            };
            let decide = session.decide(&origin.decision_id, decision);
            outcome = self.run_token.run_until_cancelled(decide).await;
            while let Ok(event) = received.try_recv() {
                self.deliver_shared(&event);
            }
            if !matches!(outcome, Some(Ok(_))) {
                break;
            }
        }
        drop(events);
        while let Ok(event) = received.try_recv() {
            self.deliver_shared(&event);
        }
        let (end, ended) = child_end(
            session,
            outcome,
            tool_call_id.clone(),
            agent_type.clone(),
            &self.child_plan_writes,
        )
        .await;
        if let ChildEnd::Done(_) = &end {
            self.deliver_shared(&Event::SubagentEnded {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                tool_call_id,
                agent_type: agent_type.to_string(),
                child_id,
                outcome: ended,
            });
        }
        end
    }
}

impl Session {
    /// Takes into this session's plan ledger the writes its children noted as they ended
    /// ([`Input::ChildPlanWrites`]), so the report counts them as this session's.
    pub(crate) async fn note_child_plan_writes(&mut self) -> Result<(), super::SessionError> {
        let taken = std::mem::take(
            &mut *self
                .child_plan_writes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (child_id, writes) in taken {
            self.handle(Input::ChildPlanWrites { child_id, writes })
                .await?;
        }
        Ok(())
    }
}

impl Shared {
    /// Whether calls of tool `name` are `subagent` calls the session runs itself.
    pub(crate) fn runs_subagent(&self, name: &str) -> bool {
        self.subagent_tool && name == SUBAGENT
    }
}
