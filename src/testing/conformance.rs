//! The store conformance suite: [`store_conformance`] and [`StoreConformance`] check that a
//! [`SessionStore`] keeps the contract the controller relies on.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use crate::model::scripted::ReplayModel;
use crate::store::SCHEMA_VERSION;
use crate::{
    AgentController, Decision, RunOutcome, SessionOptions, SessionStore, ToolRegistry,
    event::RunState, model::Message, session::DecisionAction, store::PendingKind,
    store::PendingListing, store::SessionRecord, store::StoreError,
};

/// Puts raw record text under a session id behind the store's back, as another release, a
/// crash or a hand edit leaves it; `Err` says why it could not.
type Planter = Arc<dyn Fn(&str, &str) -> Result<(), String> + Send + Sync>;

/// The config the deciders' race runs under: a planning mode that hands over to `build`.
const RACE_CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
"#;

/// How many racers save at once, and how many rounds each race runs.
/// The time the lease checks list at, in milliseconds since the Unix epoch (2096): far from the
/// wall clock, so a store that reads its own clock instead of the `now_ms` it is given lists
/// the wrong runs as interrupted.
const NOW: u64 = 4_000_000_000_000;

const RACERS: usize = 6;
const ROUNDS: usize = 5;

/// The store conformance suite, with its options: how to open your store, and (optionally) how
/// to plant a raw record in it, for the checks of unreadable records and migrations.
///
/// `open` is called for every handle the suite needs: the first, and one more per racer and per
/// "other process". Every handle it returns must see the same data (for an in-memory store,
/// hand out clones of one `Arc`). The suite works under session ids of its own
/// (`ac-conformance-…`), deletes what it wrote, and expires only records saved before 1970-01-01
/// 00:16:40 UTC (the ones it writes), so it can run against a store that holds other sessions.
///
/// Run it inside a Tokio runtime (`#[tokio::test]`; a multi-thread runtime races for real):
/// the racers are spawned tasks.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::MemoryStore;
/// use agent_controller::testing::StoreConformance;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let report = StoreConformance::new(move || store.clone()).run().await?;
/// assert!(report.is_ok());
/// println!("{report}");
/// # Ok::<(), agent_controller::testing::ConformanceFailure>(())
/// # }).unwrap();
/// ```
pub struct StoreConformance<S> {
    open: Arc<dyn Fn() -> S + Send + Sync>,
    plant: Option<Planter>,
}

impl<S> fmt::Debug for StoreConformance<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConformance")
            .field("plant", &self.plant.is_some())
            .finish_non_exhaustive()
    }
}

impl<S: SessionStore + 'static> StoreConformance<S> {
    /// The suite for the store `open` opens (see the type's docs for what `open` must do).
    pub fn new(open: impl Fn() -> S + Send + Sync + 'static) -> Self {
        Self {
            open: Arc::new(open),
            plant: None,
        }
    }

    /// How to store raw record text under a session id behind the store's back, as a record
    /// that waits for a decision: `plant(session_id, text)`. With it the suite also checks that
    /// unreadable records (garbage, a record naming another session, one of a newer schema)
    /// are kept apart, and that records of older schemas are migrated. The text is JSON, or
    /// garbage that is not. `Err(reason)` fails the check that planted it.
    ///
    /// For a [`crate::FileStore`] on `dir`: write the text to `dir/{session_id}.pending.json`.
    pub fn raw_records(
        mut self,
        plant: impl Fn(&str, &str) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.plant = Some(Arc::new(plant));
        self
    }

    /// Runs every check, each to its end, and reports each.
    ///
    /// # Errors
    /// [`ConformanceFailure`] with the whole report when any check failed; its `Display` and
    /// `Debug` both say which and why.
    pub async fn run(&self) -> Result<ConformanceReport, ConformanceFailure> {
        let prefix = unique_prefix();
        let store = self.open();
        let mut report = ConformanceReport::default();
        report.push("read your writes", read_your_writes(self, &prefix).await);
        report.push("compare-and-swap", compare_and_swap(&*store, &prefix).await);
        report.push("racing savers", racing_savers(self, &prefix).await);
        report.push("racing deciders", racing_deciders(self, &prefix).await);
        report.push("list_pending", list_pending(&*store, &prefix).await);
        report.push(
            "load_many",
            load_many(&*store, self.plant.as_ref(), &prefix).await,
        );
        report.push("a waiting subagent", waiting_subagent(self, &prefix).await);
        report.push(
            "interrupted runs and leases",
            interrupted_runs(&*store, &prefix).await,
        );
        report.push("expire", expire(&*store, &prefix).await);
        match workspace_allowances(&*store, &prefix).await {
            Err(Unsupported) => report.skip(
                WORKSPACE_ALLOWANCES,
                "the store keeps no workspace allowances (save_workspace_allowance is unsupported)",
            ),
            Ok(result) => report.push(WORKSPACE_ALLOWANCES, result),
        }
        match list_sessions(&*store, self.plant.as_ref(), &prefix).await {
            Err(Unsupported) => report.skip(
                LIST_SESSIONS,
                "the store cannot list its sessions (list_sessions is unsupported)",
            ),
            Ok(result) => report.push(LIST_SESSIONS, result),
        }
        match &self.plant {
            Some(plant) => {
                report.push(
                    "unreadable records kept apart",
                    unreadable_records(&*store, plant, &prefix).await,
                );
                report.push(
                    "migration of older records",
                    migrations(&*store, plant, &prefix).await,
                );
            }
            None => {
                for name in [
                    "unreadable records kept apart",
                    "migration of older records",
                ] {
                    report.skip(
                        name,
                        "no way to plant a raw record: give one with StoreConformance::raw_records",
                    );
                }
            }
        }
        if report.is_ok() {
            Ok(report)
        } else {
            Err(ConformanceFailure(Box::new(report)))
        }
    }

    fn open(&self) -> Arc<dyn SessionStore> {
        Arc::new((self.open)())
    }
}

/// Runs the store conformance suite on the store `open` opens: a [`StoreConformance`] without
/// raw records.
///
/// # Errors
/// As [`StoreConformance::run`].
///
/// # Examples
/// ```
/// use agent_controller::FileStore;
/// use agent_controller::testing::store_conformance;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("sessions");
/// let report = store_conformance(move || FileStore::open(&path).expect("store")).await?;
/// assert!(report.is_ok());
/// # Ok::<(), agent_controller::testing::ConformanceFailure>(())
/// # }).unwrap();
/// ```
pub async fn store_conformance<S: SessionStore + 'static>(
    open: impl Fn() -> S + Send + Sync + 'static,
) -> Result<ConformanceReport, ConformanceFailure> {
    StoreConformance::new(open).run().await
}

/// What the store conformance suite found: each check, passed, skipped or failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConformanceReport {
    /// Every check, in the order run.
    pub checks: Vec<ConformanceCheck>,
}

/// One check of a [`ConformanceReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceCheck {
    /// What it checks (`compare-and-swap`, `racing savers`, …).
    pub name: &'static str,
    /// How it went.
    pub outcome: ConformanceOutcome,
}

/// How one check of the conformance suite went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConformanceOutcome {
    /// The store kept the contract.
    Passed,
    /// Not run, and why (for example, no way to plant a raw record).
    Skipped(String),
    /// The store broke the contract: what it did, and what it must do.
    Failed(String),
}

impl ConformanceReport {
    /// Whether no check failed (skipped ones do not count).
    pub fn is_ok(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &ConformanceCheck> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, ConformanceOutcome::Failed(_)))
    }

    fn push(&mut self, name: &'static str, result: Result<(), String>) {
        let outcome = match result {
            Ok(()) => ConformanceOutcome::Passed,
            Err(message) => ConformanceOutcome::Failed(message),
        };
        self.checks.push(ConformanceCheck { name, outcome });
    }

    fn skip(&mut self, name: &'static str, reason: &str) {
        self.checks.push(ConformanceCheck {
            name,
            outcome: ConformanceOutcome::Skipped(reason.to_owned()),
        });
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |want: fn(&ConformanceOutcome) -> bool| {
            self.checks.iter().filter(|c| want(&c.outcome)).count()
        };
        write!(
            f,
            "store conformance: {} passed, {} failed, {} skipped",
            count(|o| *o == ConformanceOutcome::Passed),
            count(|o| matches!(o, ConformanceOutcome::Failed(_))),
            count(|o| matches!(o, ConformanceOutcome::Skipped(_))),
        )?;
        for check in &self.checks {
            match &check.outcome {
                ConformanceOutcome::Passed => write!(f, "\n  ok    {}", check.name)?,
                ConformanceOutcome::Skipped(why) => {
                    write!(f, "\n  skip  {}: {why}", check.name)?;
                }
                ConformanceOutcome::Failed(why) => {
                    write!(f, "\n  FAIL  {}: {why}", check.name)?;
                }
            }
        }
        Ok(())
    }
}

/// The store broke the contract: the [`ConformanceReport`] says where. `Debug` prints the
/// same readable report as `Display`, so `?` in a test shows it.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConformanceFailure(pub Box<ConformanceReport>);

impl fmt::Debug for ConformanceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Fails the check with `message` unless `condition` holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(format!($($message)+));
        }
    };
}

/// A prefix no other run of the suite uses at the same time.
fn unique_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "ac-conformance-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The text of a store error for a failure message.
fn said(result: &Result<impl fmt::Debug, StoreError>) -> String {
    match result {
        Ok(value) => format!("Ok({value:?})"),
        Err(e) => format!("Err({e})"),
    }
}

/// A record of session `id` at `version`, with a pending plan or not, saved at `updated_at`
/// (seconds since the epoch; the suite's records are all from 1970).
fn record(id: &str, version: u64, pending: bool, updated_at: u64) -> SessionRecord {
    let pending = pending.then(|| {
        json!({
            "runId": "run_1",
            "toolCallId": "call_1",
            "toolName": "submit_plan",
            "suspendPayload": {
                "path": ".agent/plans/p.md",
                "title": format!("Plan of {id}"),
                "plan": "1. step",
                // Of the text shown: a record whose plan text does not match is refused.
                "sha256": crate::plan::sha256_hex(format!("# Plan of {id}\n\n1. step\n").as_bytes()),
                "targetModeId": "build",
                "decisionId": "decision_1",
            },
        })
    });
    let value = json!({
        "schemaVersion": SCHEMA_VERSION,
        "sessionId": id,
        "version": version,
        "configFingerprint": "conformance",
        "modeId": "plan",
        "messages": [{"role": "user", "content": format!("version {version}")}],
        "runCounter": 1,
        "run": {"runId": "run_1", "state": if pending.is_some() { "suspended" } else { "completed" }},
        "pending": pending,
        "lastDecided": null,
        "decisionCounter": 1,
        "updatedAt": updated_at,
    });
    // The layout is the crate's own: it parses.
    serde_json::from_value(value).unwrap_or_else(|e| unreachable!("the suite's record: {e}"))
}

/// The task list of version `version` of the read-your-writes record: none in the first,
/// then one that grows and changes, with text beyond ASCII.
fn task_list(version: u64) -> Vec<crate::tool::tasks::Task> {
    use crate::tool::tasks::{Task, TaskStatus};
    (1..version)
        .map(|k| {
            let status = match (k + version) % 3 {
                0 => TaskStatus::Pending,
                1 => TaskStatus::InProgress,
                _ => TaskStatus::Completed,
            };
            let mut task = Task::new(
                format!("step_{k}"),
                format!("Étape {k} ✓ of v{version}"),
                status,
            );
            task.active_form = format!("Doing step {k}");
            task
        })
        .collect()
}

/// A record whose run is running, with a lease ending at `lease` (ms), or none.
fn running(id: &str, lease: Option<u64>) -> SessionRecord {
    let mut r = record(id, 1, false, 40);
    if let Some(run) = r.run.as_mut() {
        run.state = RunState::Running;
        run.owner = lease.map(|_| "conformance-host".to_owned());
        run.lease_expires_at_ms = lease;
    }
    r
}

/// Tool calls waiting for approval in a record.
fn with_waiting_calls(mut r: SessionRecord, calls: &[&str]) -> SessionRecord {
    r.pending = None;
    if let Some(run) = r.run.as_mut() {
        run.state = RunState::Suspended;
    }
    r.pending_tool_calls = calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let args = json!({ "path": format!("{call}.txt"), "content": "x" });
            let value = json!({
                "runId": "run_1",
                "toolCallId": call,
                "suspendPayload": {
                    "decisionId": format!("decision_{}", i + 1),
                    "toolName": "write_file",
                    "argsSha256": crate::jcs::sha256(&args),
                    "args": args,
                },
            });
            serde_json::from_value(value)
                .unwrap_or_else(|e| unreachable!("the suite's tool call: {e}"))
        })
        .collect();
    r
}

/// A subagent's call waiting in its parent's record: the parent's decision `decision_1` names
/// the child (`subagent`), whose own record (its call waiting as its `decision_1`) is kept in
/// `children`.
fn with_waiting_child(r: SessionRecord) -> SessionRecord {
    let child_id = format!("{}.run_1.sub1_0", r.session_id);
    let mut child = with_waiting_calls(record(&child_id, 0, false, r.updated_at), &["c_1"]);
    child.messages.push(
        serde_json::from_value(json!({"role": "user", "content": "the child's task: ünïcödé"}))
            .unwrap_or_else(|e| unreachable!("the suite's message: {e}")),
    );
    let mut parent = with_waiting_calls(r, &["c_1"]);
    for waiting in &mut parent.pending_tool_calls {
        waiting.suspend_payload.subagent = Some(Box::new(crate::subagent::SubagentOrigin {
            agent_type: "explore".to_owned(),
            child_id: child_id.clone(),
            tool_call_id: "call_sub".to_owned(),
            decision_id: "decision_1".to_owned(),
        }));
    }
    parent.children = vec![crate::store::ChildRecord {
        tool_call_id: "call_sub".to_owned(),
        agent_type: "explore".to_owned(),
        child_id,
        record: Box::new(child),
    }];
    parent
}

/// A parent whose subagent's call waits: saved, it loads back whole (the child's record
/// with it) on another handle, and its decision is listed naming the child.
async fn waiting_subagent<S: SessionStore + 'static>(
    suite: &StoreConformance<S>,
    prefix: &str,
) -> Result<(), String> {
    let (a, b) = (suite.open(), suite.open());
    let id = format!("{prefix}-child");
    let result = async {
        let r = with_waiting_child(record(&id, 1, false, 26));
        ensure_saved(
            "save of a parent whose child waits",
            &a.save(&r, None).await,
        )?;
        let loaded = b.load(&id).await;
        ensure!(
            matches!(&loaded, Ok(Some(l)) if *l == r),
            "a parent whose subagent waits did not load back exactly as saved (its children \
             with their records, its decisions naming the child): {}",
            said(&loaded)
        );
        let listing = list(&*b).await?;
        let listed = listing
            .pending
            .iter()
            .find(|p| p.session_id == id)
            .ok_or("the child's waiting call is not listed")?;
        ensure!(
            listed
                .subagent
                .as_ref()
                .is_some_and(|s| s.tool_call_id == "call_sub" && s.agent_type == "explore"),
            "the listed decision does not name the subagent: {listed:?}"
        );
        Ok(())
    }
    .await;
    cleanup(&*a, &[&id]).await;
    result
}

/// A question of `ask_user` waiting for the user's answer in a record (a tool's suspension).
fn with_waiting_question(mut r: SessionRecord) -> SessionRecord {
    r.pending = None;
    if let Some(run) = r.run.as_mut() {
        run.state = RunState::Suspended;
    }
    let payload = json!({ "question": "Which target?", "options": [{ "label": "staging" }] });
    let value = json!({
        "runId": "run_1",
        "toolCallId": "call_q",
        "suspendPayload": {
            "kind": "question",
            "decisionId": "decision_1",
            "toolName": "ask_user",
            "args": payload,
            "payload": payload,
            "answerSchema": { "type": "string", "enum": ["staging"] },
            "payloadSha256": crate::jcs::sha256(&payload),
        },
    });
    r.pending_suspensions = vec![
        serde_json::from_value(value).unwrap_or_else(|e| unreachable!("the suite's question: {e}")),
    ];
    r
}

/// The ids of a check's sessions: `{prefix}-{name}` for each of `names`.
fn session_ids<const N: usize>(prefix: &str, names: [&str; N]) -> [String; N] {
    names.map(|name| format!("{prefix}-{name}"))
}

/// Deletes the session `id`, which holds `what`: the delete must say it removed one.
async fn ensure_deletes(store: &dyn SessionStore, id: &str, what: &str) -> Result<(), String> {
    let deleted = store.delete(id).await;
    ensure!(
        deleted == Ok(true),
        "delete of {what} gave {}, not Ok(true)",
        said(&deleted)
    );
    Ok(())
}

async fn cleanup(store: &dyn SessionStore, ids: &[&str]) {
    for id in ids {
        // Best effort: a failed delete shows up in the next run as nothing (ids are unique).
        let _ = store.delete(id).await;
    }
}

async fn read_your_writes<S: SessionStore + 'static>(
    suite: &StoreConformance<S>,
    prefix: &str,
) -> Result<(), String> {
    let (a, b) = (suite.open(), suite.open());
    let id = format!("{prefix}-ryw");
    let result = async {
        let missing = a.load(&id).await;
        ensure!(
            matches!(missing, Ok(None)),
            "load of a session never saved gave {}, not Ok(None)",
            said(&missing)
        );
        for version in 1..=3 {
            let mut r = record(&id, version, version == 2, version);
            // The session's task list is part of the record: kept whole, in order, and
            // replaced by a later save.
            r.tasks = task_list(version);
            let expected = (version > 1).then(|| version - 1);
            let saved = a.save(&r, expected).await;
            ensure_saved(
                &format!("save of version {version} (expected {expected:?})"),
                &saved,
            )?;
            for (handle, store) in [("the same handle", &a), ("another handle", &b)] {
                let loaded = store.load(&id).await;
                ensure!(
                    matches!(&loaded, Ok(Some(l)) if *l == r),
                    "after saving version {version}, a load on {handle} did not return exactly \
                     the record saved: {}",
                    said(&loaded)
                );
            }
        }
        ensure_deletes(&*b, &id, "a stored session").await?;
        let gone = a.load(&id).await;
        ensure!(
            matches!(gone, Ok(None)),
            "load after delete gave {}, not Ok(None)",
            said(&gone)
        );
        let again = a.delete(&id).await;
        ensure!(
            again == Ok(false),
            "a second delete gave {}, not Ok(false)",
            said(&again)
        );
        let recreated = a.save(&record(&id, 1, false, 1), None).await;
        ensure!(
            recreated.is_ok(),
            "a deleted session could not be saved anew (expected None): {}",
            said(&recreated)
        );
        Ok(())
    }
    .await;
    cleanup(&*a, &[&id]).await;
    result
}

/// `Ok` when `saved` is; else that `what` failed, and how.
fn ensure_saved(what: &str, saved: &Result<(), StoreError>) -> Result<(), String> {
    ensure!(saved.is_ok(), "{what} failed: {}", said(saved));
    Ok(())
}

/// Saves each of `records` as a new session.
async fn save_new(
    store: &dyn SessionStore,
    records: impl IntoIterator<Item = SessionRecord>,
) -> Result<(), String> {
    for r in records {
        let saved = store.save(&r, None).await;
        ensure_saved(&format!("saving `{}`", r.session_id), &saved)?;
    }
    Ok(())
}

/// The store's listing at [`NOW`].
async fn list(store: &dyn SessionStore) -> Result<PendingListing, String> {
    store
        .list_pending(NOW)
        .await
        .map_err(|e| format!("list_pending failed: {e}"))
}

/// `session/decision` of every pending decision on the pages of at most `limit` that
/// [`SessionStore::list_pending_page`] gives, following each page's cursor as a client would
/// (through its text).
async fn pages(store: &dyn SessionStore, limit: usize) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    let mut after: Option<crate::store::PendingCursor> = None;
    for _ in 0..100_000 {
        let page = store
            .list_pending_page(after.as_ref(), limit)
            .await
            .map_err(|e| format!("list_pending_page failed: {e}"))?;
        ensure!(
            page.pending.len() <= limit,
            "list_pending_page with limit {limit} gave {} decisions",
            page.pending.len()
        );
        keys.extend(
            page.pending
                .iter()
                .map(|p| format!("{}/{}", p.session_id, p.decision_id)),
        );
        match page.next_cursor {
            Some(next) => {
                after = Some(next.to_string().parse().map_err(|e| {
                    format!("list_pending_page gave a cursor that does not parse back: {e}")
                })?);
            }
            None => return Ok(keys),
        }
    }
    Err("list_pending_page never gave a last page (one without next_cursor)".to_owned())
}

/// The failure text for a save that should have been refused as a conflict.
/// `Ok` when `got` is the [`StoreError::Conflict`] a compare-and-swap store refuses `what`
/// with; else what went wrong.
fn ensure_conflict(what: &str, got: &Result<(), StoreError>) -> Result<(), String> {
    match got {
        Err(StoreError::Conflict { .. }) => Ok(()),
        Ok(()) => Err(format!(
            "{what} succeeded: the store ignores the expected version (no compare-and-swap). \
             `save(record, expected)` must compare `expected` with the stored version (None: \
             no session) in the same atomic step as the write, and return \
             StoreError::Conflict when they differ; otherwise two deciders can both win"
        )),
        Err(e) => Err(format!(
            "{what} failed with `{e}`, not StoreError::Conflict"
        )),
    }
}

async fn compare_and_swap(store: &dyn SessionStore, prefix: &str) -> Result<(), String> {
    let id = format!("{prefix}-cas");
    let missing = format!("{prefix}-cas-missing");
    let result = async {
        let v1 = record(&id, 1, false, 1);
        let first = store.save(&v1, None).await;
        ensure_saved("the first save", &first)?;
        let v2 = record(&id, 2, true, 2);
        let second = store.save(&v2, Some(1)).await;
        ensure_saved("the second save", &second)?;

        let twice = store.save(&record(&id, 1, false, 3), None).await;
        ensure_conflict(
            &format!("saving session `{id}` as new (expected None) while version 2 is stored"),
            &twice,
        )?;
        let stale = store.save(&record(&id, 2, false, 3), Some(1)).await;
        ensure_conflict(
            &format!("saving session `{id}` expecting version 1 while version 2 is stored"),
            &stale,
        )?;
        let ahead = store.save(&record(&missing, 4, false, 3), Some(3)).await;
        ensure_conflict(
            &format!("saving session `{missing}`, which does not exist, expecting version 3"),
            &ahead,
        )?;
        let kept = store.load(&id).await;
        ensure!(
            matches!(&kept, Ok(Some(r)) if *r == v2),
            "after the refused saves the stored record is not version 2 as saved: {}",
            said(&kept)
        );
        let gone = store.load(&missing).await;
        ensure!(
            matches!(gone, Ok(None)),
            "a refused save of a session that did not exist left one: {}",
            said(&gone)
        );
        Ok(())
    }
    .await;
    cleanup(store, &[&id, &missing]).await;
    result
}

/// [`SessionStore::load_many`] answers, for each id asked and in that order, what
/// [`SessionStore::load`] answers: a record (with a pending plan, waiting tool calls, or
/// nothing pending), `Ok(None)` for a missing id, each id asked twice twice, an empty answer for
/// no id, and (with a way to plant one) an error for an unreadable record without hiding the
/// others.
async fn load_many(
    store: &dyn SessionStore,
    plant: Option<&Planter>,
    prefix: &str,
) -> Result<(), String> {
    let [plan, calls, idle, missing, garbage] = session_ids(
        &format!("{prefix}-many"),
        ["plan", "calls", "idle", "missing", "garbage"],
    );
    let result = async {
        save_new(
            store,
            [
                record(&plan, 1, true, 60),
                with_waiting_calls(record(&calls, 1, false, 61), &["c_1", "c_2"]),
                record(&idle, 1, false, 62),
            ],
        )
        .await?;
        let mut ids = vec![
            plan.as_str(),
            missing.as_str(),
            calls.as_str(),
            idle.as_str(),
            plan.as_str(),
        ];
        if let Some(plant) = plant {
            plant(&garbage, "{ not json").map_err(|e| format!("planting garbage failed: {e}"))?;
            ids.insert(2, garbage.as_str());
        }
        let none = store.load_many(&[]).await;
        ensure!(
            matches!(&none, Ok(answers) if answers.is_empty()),
            "load_many of no id gave {}, not Ok([])",
            said(&none)
        );
        let many = store
            .load_many(&ids)
            .await
            .map_err(|e| format!("load_many of {ids:?} failed: {e}"))?;
        ensure!(
            many.len() == ids.len(),
            "load_many of {} ids gave {} answers: it must give one per id asked",
            ids.len(),
            many.len()
        );
        for (id, answer) in ids.iter().zip(&many) {
            let one = store.load(id).await;
            let same = match (answer, &one) {
                (Ok(a), Ok(b)) => a.as_deref() == b.as_ref(),
                (Err(_), Err(_)) => true,
                _ => false,
            };
            ensure!(
                same,
                "load_many answered {} for `{id}`, where load answers {}",
                said(answer),
                said(&one)
            );
        }
        ensure!(
            matches!(&many[1], Ok(None)),
            "load_many answered {} for the missing session `{missing}`, not Ok(None)",
            said(&many[1])
        );
        Ok(())
    }
    .await;
    cleanup(store, &[&plan, &calls, &idle, &garbage]).await;
    result
}

/// `RACERS` handles save version `expected + 1` at once: exactly one must win.
async fn race_once(
    handles: &[Arc<dyn SessionStore>],
    id: &str,
    expected: Option<u64>,
) -> Result<(), String> {
    let barrier = Arc::new(tokio::sync::Barrier::new(handles.len()));
    let version = expected.map_or(1, |v| v + 1);
    let mut tasks = Vec::new();
    for (i, handle) in handles.iter().enumerate() {
        let (handle, barrier) = (handle.clone(), barrier.clone());
        let mut r = record(id, version, false, version);
        r.messages = vec![Message::User {
            content: format!("racer {i}"),
        }];
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            (handle.save(&r, expected).await, r)
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        match task.await {
            Ok((Ok(()), r)) => winners.push(r),
            Ok((Err(StoreError::Conflict { .. }), _)) => {}
            Ok((Err(e), _)) => {
                return Err(format!(
                    "a racing save (expected {expected:?}) failed with `{e}`, not \
                     StoreError::Conflict"
                ));
            }
            Err(e) => return Err(format!("a racing save panicked: {e}")),
        }
    }
    ensure!(
        winners.len() == 1,
        "{} of {} savers racing on session `{id}` (all expecting version {expected:?}) won: \
         exactly one may; the others must get StoreError::Conflict. {}",
        winners.len(),
        handles.len(),
        if winners.len() > 1 {
            "The store does not compare and swap atomically"
        } else {
            "None winning loses the write"
        }
    );
    let stored = handles[0].load(id).await;
    ensure!(
        matches!(&stored, Ok(Some(r)) if *r == winners[0]),
        "after the race the stored record is not the winner's: {}",
        said(&stored)
    );
    Ok(())
}

async fn racing_savers<S: SessionStore + 'static>(
    suite: &StoreConformance<S>,
    prefix: &str,
) -> Result<(), String> {
    let handles: Vec<Arc<dyn SessionStore>> = (0..RACERS).map(|_| suite.open()).collect();
    let mut ids = Vec::new();
    let mut result = Ok(());
    for round in 0..ROUNDS {
        let id = format!("{prefix}-race-{round}");
        ids.push(id.clone());
        result = async {
            race_once(&handles, &id, None).await?;
            race_once(&handles, &id, Some(1)).await?;
            race_once(&handles, &id, Some(2)).await
        }
        .await;
        if result.is_err() {
            break;
        }
    }
    for id in &ids {
        cleanup(&*handles[0], &[id]).await;
    }
    result
}

async fn racing_deciders<S: SessionStore + 'static>(
    suite: &StoreConformance<S>,
    prefix: &str,
) -> Result<(), String> {
    let workspace = tempfile::tempdir().map_err(|e| format!("no temporary workspace: {e}"))?;
    let plans = workspace.path().join(".agent/plans");
    std::fs::create_dir_all(&plans).map_err(|e| format!("no plans directory: {e}"))?;
    std::fs::write(plans.join("p.md"), "# Race\n\n1. step\n")
        .map_err(|e| format!("no plan file: {e}"))?;
    let graph = crate::config::parse(RACE_CONFIG, "conformance.toml")
        .map_err(|e| format!("the suite's config: {e}"))?;
    let controller = |model: ReplayModel| {
        AgentController::builder(graph.clone(), Arc::new(model))
            .tools(ToolRegistry::new())
            .workspace(workspace.path())
            .store(suite.open())
            .build()
            .map_err(|e| format!("cannot build a controller on the store: {e}"))
    };
    let mut ids = Vec::new();
    let mut result = Ok(());
    for round in 0..ROUNDS {
        let id = format!("{prefix}-decide-{round}");
        ids.push(id.clone());
        result = decide_race(&controller, &id).await;
        if result.is_err() {
            break;
        }
    }
    cleanup(
        &*suite.open(),
        &ids.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    result
}

/// Suspends a plan in session `id`, then two deciders (approve, reject), each restored from its
/// own handle, decide it at once: exactly one may win, and the mode changes at most once.
async fn decide_race(
    controller: &impl Fn(ReplayModel) -> Result<AgentController, String>,
    id: &str,
) -> Result<(), String> {
    let submit = ReplayModel::call(
        "call_1",
        "submit_plan",
        json!({ "path": ".agent/plans/p.md" }),
    );
    let planner = controller(ReplayModel::new([submit]))?;
    let mut session = planner
        .start_session(SessionOptions::new().mode("plan").id(id))
        .await
        .map_err(|e| format!("a session could not start on the store: {e}"))?;
    let outcome = session
        .send_message("plan it")
        .await
        .map_err(|e| format!("submitting a plan failed on the store: {e}"))?;
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = outcome
    else {
        return Err(format!(
            "a submitted plan did not suspend the run: {outcome:?}"
        ));
    };
    let run_id = run_id.to_string();
    drop(session);
    let mut deciders = Vec::new();
    for decision in [Decision::approve(), Decision::reject_with("no")] {
        let c = controller(ReplayModel::new([ReplayModel::text("done")]))?;
        let session = c
            .restore_session(id, SessionOptions::new())
            .await
            .map_err(|e| format!("the pending plan could not be restored: {e}"))?;
        deciders.push((session, decision));
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(deciders.len()));
    let mut tasks = Vec::new();
    for (mut session, decision) in deciders {
        let (barrier, run_id, call_id) = (barrier.clone(), run_id.clone(), tool_call_id.clone());
        let approve = decision.action == DecisionAction::Approved;
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            (session.resume(&run_id, &call_id, decision).await, approve)
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        match task.await {
            Ok((Ok(_), approve)) => winners.push(approve),
            Ok((Err(e), _)) if e.is_conflict() => {}
            Ok((Err(e), _)) => {
                return Err(format!(
                    "a racing decider failed with `{e}`, not a store conflict"
                ));
            }
            Err(e) => return Err(format!("a racing decider panicked: {e}")),
        }
    }
    ensure!(
        winners.len() == 1,
        "{} of 2 deciders racing on one pending plan (session `{id}`) won: exactly one may, the \
         other must lose with StoreError::Conflict{}",
        winners.len(),
        if winners.len() > 1 {
            ": the store does not compare and swap atomically, so both decisions were applied"
        } else {
            ""
        }
    );
    let stored = controller(ReplayModel::new([]))?
        .store()
        .cloned()
        .ok_or("the controller has no store")?
        .load(id)
        .await;
    let Ok(Some(stored)) = stored else {
        return Err(format!("after the race, loading gave {}", said(&stored)));
    };
    let want = if winners[0] { "build" } else { "plan" };
    ensure!(
        stored.mode_id == want && stored.pending.is_none() && stored.history.len() == 1,
        "after the race the store holds mode `{}`, {} decisions in its history and {} pending \
         plan: the winner's decision (mode `{want}`, one decision, none pending) was lost",
        stored.mode_id,
        stored.history.len(),
        if stored.pending.is_some() { "a" } else { "no" }
    );
    Ok(())
}

/// Our entries of a listing (the store may hold other sessions).
fn ours(listing: &PendingListing, prefix: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let pending = listing
        .pending
        .iter()
        .filter(|p| p.session_id.starts_with(prefix))
        .map(|p| format!("{}/{}", p.session_id, p.decision_id))
        .collect();
    let unreadable = listing.unreadable.iter().map(|u| u.session_id.as_str());
    let interrupted = listing.interrupted.iter().map(|r| r.session_id.as_str());
    (
        pending,
        starting_with(unreadable, prefix),
        starting_with(interrupted, prefix),
    )
}

/// The session ids of `ids` that start with `prefix`.
fn starting_with<'a>(ids: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<String> {
    ids.filter(|id| id.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

async fn list_pending(store: &dyn SessionStore, prefix: &str) -> Result<(), String> {
    let prefix = format!("{prefix}-list");
    let [old, new, idle, calls, asks] =
        session_ids(&prefix, ["old", "new", "idle", "calls", "asks"]);
    let result = async {
        save_new(
            store,
            [
                record(&new, 1, true, 30),
                record(&idle, 1, false, 10),
                record(&old, 1, true, 20),
                with_waiting_calls(record(&calls, 1, false, 25), &["call_a", "call_b"]),
                with_waiting_question(record(&asks, 1, false, 27)),
            ],
        )
        .await?;
        let listing = list(store).await?;
        let (pending, unreadable, _) = ours(&listing, &prefix);
        let want = [
            format!("{old}/decision_1"),
            format!("{calls}/decision_1"),
            format!("{calls}/decision_2"),
            format!("{asks}/decision_1"),
            format!("{new}/decision_1"),
        ];
        ensure!(
            pending == want,
            "list_pending listed {pending:?}; it must list each pending plan and each tool call \
             waiting for approval once, oldest first (by updatedAt), and no idle session: \
             {want:?}"
        );
        for limit in [1, 2, 3] {
            let paged: Vec<String> = pages(store, limit)
                .await?
                .into_iter()
                .filter(|k| k.starts_with(&prefix))
                .collect();
            ensure!(
                paged == want,
                "list_pending_page with limit {limit} gave {paged:?} over its pages; they must \
                 hold every pending decision once, in list_pending's order: {want:?}"
            );
        }
        ensure!(
            unreadable.is_empty(),
            "healthy records were reported unreadable: {unreadable:?}"
        );
        let summary = listing
            .pending
            .iter()
            .find(|p| p.session_id == old)
            .ok_or("the old plan is not listed")?;
        ensure!(
            *summary == record(&old, 1, true, 20).pending_summaries()[0],
            "the listed summary of `{old}` is not the record's own \
             (SessionRecord::pending_summaries): {summary:?}"
        );
        ensure!(
            listing
                .pending
                .iter()
                .filter(|p| p.session_id == calls)
                .all(|p| p.kind == PendingKind::ToolCall),
            "a waiting tool call was not listed as kind `tool_call`"
        );
        // A question waiting for an answer: listed as kind `question`, as the record lists
        // it, and read back whole.
        let question = with_waiting_question(record(&asks, 1, false, 27));
        let listed: Vec<_> = listing
            .pending
            .iter()
            .filter(|p| p.session_id == asks)
            .collect();
        ensure!(
            listed.len() == 1
                && listed[0].kind == PendingKind::Question
                && *listed[0] == question.pending_summaries()[0],
            "a waiting question was not listed as kind `question` with its payload: {listed:?}"
        );
        let loaded = store.load(&asks).await.map_err(|e| e.to_string())?;
        ensure!(
            loaded.as_ref().map(|r| &r.pending_suspensions) == Some(&question.pending_suspensions),
            "a waiting question did not come back as saved: {loaded:?}"
        );
        // A decision saved: the plan is listed no more, at once.
        let decided = store.save(&record(&old, 2, false, 35), Some(1)).await;
        ensure_saved("saving the decision", &decided)?;
        let listing = list(store).await?;
        let (pending, _, _) = ours(&listing, &prefix);
        ensure!(
            !pending.iter().any(|p| p.starts_with(&old)),
            "a plan decided (saved without `pending`) is still listed: {pending:?}"
        );
        Ok(())
    }
    .await;
    cleanup(store, &[&old, &new, &idle, &calls, &asks]).await;
    result
}

async fn interrupted_runs(store: &dyn SessionStore, prefix: &str) -> Result<(), String> {
    let prefix = format!("{prefix}-lease");
    let [ended, live, none, done] = session_ids(&prefix, ["ended", "live", "none", "done"]);
    let now = NOW;
    let result = async {
        save_new(
            store,
            [
                running(&ended, Some(now.saturating_sub(60_000))),
                running(&live, Some(now + 3_600_000)),
                running(&none, None),
                record(&done, 1, false, 40),
            ],
        )
        .await?;
        let listing = list(store).await?;
        let (_, _, mut interrupted) = ours(&listing, &prefix);
        interrupted.sort();
        let mut want = vec![ended.clone(), none.clone()];
        want.sort();
        ensure!(
            interrupted == want,
            "list_pending listed the interrupted runs {interrupted:?}; it must list every \
             running run whose lease has ended or that has none ({want:?}), and not one whose \
             lease still runs or that ended"
        );
        let listed = listing
            .interrupted
            .iter()
            .find(|r| r.session_id == ended)
            .ok_or("the run whose lease ended is not listed")?;
        let own = running(&ended, Some(now.saturating_sub(60_000))).interrupted_run(now);
        ensure!(
            Some(listed) == own.as_ref(),
            "the listed interrupted run is not the record's own \
             (SessionRecord::interrupted_run): {listed:?}"
        );
        // A continuer takes the lease over with a compare-and-swap save: then it is not listed.
        let mut taken = running(&ended, Some(now + 3_600_000));
        taken.version = 2;
        let saved = store.save(&taken, Some(1)).await;
        ensure_saved("taking a lease over", &saved)?;
        let listing = list(store).await?;
        let (_, _, interrupted) = ours(&listing, &prefix);
        ensure!(
            !interrupted.contains(&ended),
            "a run whose lease was renewed (saved with a later leaseExpiresAtMs) is still \
             listed as interrupted"
        );
        Ok(())
    }
    .await;
    cleanup(store, &[&ended, &live, &none, &done]).await;
    result
}

/// Only records saved before this (seconds since the epoch) are expired by the suite: its own.
const EXPIRE_BEFORE: u64 = 1_000;

/// The name of the check of workspace allowances.
const WORKSPACE_ALLOWANCES: &str = "workspace allowances keyed by workspace and config";

/// The store answered [`StoreError::Unsupported`]: the check is skipped.
struct Unsupported;

/// Workspace allowances: listed by the workspace they were saved for and no other, each once
/// however often saved and in the order first saved, gone once revoked; the config fingerprint
/// is kept as saved.
async fn workspace_allowances(
    store: &dyn SessionStore,
    prefix: &str,
) -> Result<Result<(), String>, Unsupported> {
    use crate::allowance::{Allowance, AllowancePattern, AllowanceScope};
    let root = std::path::PathBuf::from(format!("/conformance/{prefix}"));
    let (a, b) = (root.join("a"), root.join("b"));
    let make = |workspace: &std::path::Path, fingerprint: &str, tool: &str| {
        let mut allowance = Allowance::new(AllowanceScope::Workspace, "", "build", tool)
            .in_workspace(workspace, fingerprint);
        allowance.session_id = format!("{prefix}-s");
        allowance.decision_id = "decision_1".to_owned();
        allowance
    };
    let in_a = make(&a, "f1", "write_file");
    let other_config = make(&a, "f2", "write_file");
    let in_b = make(&b, "f1", "write_file");
    let narrowed = {
        let mut n = make(&a, "f1", "run_command");
        n.pattern = Some(AllowancePattern::glob("command", "git *"));
        n.in_workspace(&a, "f1")
    };
    match store.save_workspace_allowance(&in_a).await {
        Err(StoreError::Unsupported(_)) => return Err(Unsupported),
        Err(e) => return Ok(Err(format!("saving a workspace allowance failed: {e}"))),
        Ok(()) => {}
    }
    Ok(async {
        for allowance in [&other_config, &in_b, &narrowed, &in_a] {
            store
                .save_workspace_allowance(allowance)
                .await
                .map_err(|e| format!("saving a workspace allowance failed: {e}"))?;
        }
        let ours = |listed: Vec<Allowance>| -> Vec<Allowance> {
            listed
                .into_iter()
                .filter(|l| l.workspace.as_deref().is_some_and(|w| w.starts_with(&root)))
                .collect()
        };
        let listed = ours(
            store
                .list_workspace_allowances(Some(&a))
                .await
                .map_err(|e| format!("listing workspace allowances failed: {e}"))?,
        );
        if let Some(stray) = listed.iter().find(|l| l.workspace.as_deref() != Some(&a)) {
            return Err(format!(
                "the allowances of workspace {} include {} of workspace {:?}: a workspace allowance must never apply to another workspace",
                a.display(),
                stray.id,
                stray.workspace
            ));
        }
        let ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        let want = [in_a.id.as_str(), other_config.id.as_str(), narrowed.id.as_str()];
        if ids.len() != want.len() || want.iter().any(|w| !ids.contains(w)) {
            return Err(format!(
                "listing workspace {} gave {ids:?}, not each of {want:?} once (saved twice, kept once)",
                a.display()
            ));
        }
        // In the order first saved (saving one again keeps its place), as a session lists them.
        if ids != want {
            return Err(format!(
                "listing workspace {} gave {ids:?}, not {want:?}: the order they were first saved in (saving one again keeps its place)",
                a.display()
            ));
        }
        if listed.iter().any(|l| !want.iter().any(|w| *w == l.id) || !(l == &in_a || l == &other_config || l == &narrowed)) {
            return Err("a listed allowance is not what was saved (its key, fingerprint or pattern changed)".to_owned());
        }
        let all = ours(
            store
                .list_workspace_allowances(None)
                .await
                .map_err(|e| format!("listing every workspace allowance failed: {e}"))?,
        );
        if all.len() != 4 {
            return Err(format!("listing every workspace gave {} allowances, not 4", all.len()));
        }
        let revoked = store.revoke_workspace_allowance(&in_a.id).await.map_err(|e| format!("revoking failed: {e}"))?;
        let again = store.revoke_workspace_allowance(&in_a.id).await.map_err(|e| format!("revoking again failed: {e}"))?;
        if !revoked || again {
            return Err(format!("revoking an allowance said {revoked}, then again {again}: want true, then false"));
        }
        let left = ours(store.list_workspace_allowances(Some(&a)).await.map_err(|e| e.to_string())?);
        if left.iter().any(|l| l.id == in_a.id) {
            return Err("a revoked allowance is still listed".to_owned());
        }
        for allowance in [&other_config, &in_b, &narrowed] {
            let _ = store.revoke_workspace_allowance(&allowance.id).await;
        }
        Ok(())
    }
    .await)
}

/// The name of the check of session listings.
const LIST_SESSIONS: &str = "list_sessions by workspace, newest first";

/// `record` working in `workspace`, first prompted with `prompt`.
fn in_workspace(mut r: SessionRecord, workspace: &str, prompt: &str) -> SessionRecord {
    r.workspace = serde_json::from_value(json!({ "path": workspace, "identity": {} }))
        .unwrap_or_else(|e| unreachable!("the suite's workspace: {e}"));
    r.messages = vec![Message::User {
        content: prompt.to_owned(),
    }];
    r
}

/// Session listings: every session, each as its record's own summary
/// ([`SessionRecord::summary`]), newest first; with a workspace, that workspace's only; and,
/// when records can be planted, one that cannot be read reported apart without hiding the
/// others.
async fn list_sessions(
    store: &dyn SessionStore,
    plant: Option<&Planter>,
    prefix: &str,
) -> Result<Result<(), String>, Unsupported> {
    let prefix = format!("{prefix}-sessions");
    let [a_old, a_new, b, none, garbage] =
        session_ids(&prefix, ["a-old", "a-new", "b", "none", "garbage"]);
    let (ws_a, ws_b) = (
        format!("/conformance/{prefix}/a"),
        format!("/conformance/{prefix}/b"),
    );
    let records = [
        in_workspace(
            record(&a_old, 1, false, 70),
            &ws_a,
            "Add dark mode\nto settings",
        ),
        in_workspace(record(&a_new, 1, true, 90), &ws_a, "Fix the login"),
        in_workspace(record(&b, 1, false, 80), &ws_b, "Other workspace"),
        record(&none, 1, false, 60),
    ];
    if let Err(e) = save_new(store, records.clone()).await {
        cleanup(store, &[&a_old, &a_new, &b, &none]).await;
        return Ok(Err(e));
    }
    let ids = |listing: &crate::store::SessionListing| -> Vec<String> {
        starting_with(
            listing.sessions.iter().map(|s| s.session_id.as_str()),
            &prefix,
        )
    };
    let result = async {
        let all = match store.list_sessions(None).await {
            Err(StoreError::Unsupported(_)) => return Err(None),
            Err(e) => return Err(Some(format!("list_sessions failed: {e}"))),
            Ok(all) => all,
        };
        let want = [a_new.clone(), b.clone(), a_old.clone(), none.clone()];
        if ids(&all) != want {
            return Err(Some(format!(
                "list_sessions(None) listed {:?}: it must list every session, newest first \
                 (by updatedAt, then id): {want:?}",
                ids(&all)
            )));
        }
        for r in &records {
            let listed = all.sessions.iter().find(|s| s.session_id == r.session_id);
            if listed != Some(&r.summary()) {
                return Err(Some(format!(
                    "the listed session `{}` is not the record's own summary \
                     (SessionRecord::summary): {listed:?}",
                    r.session_id
                )));
            }
        }
        let in_a = store
            .list_sessions(Some(std::path::Path::new(&ws_a)))
            .await
            .map_err(|e| Some(format!("list_sessions of a workspace failed: {e}")))?;
        if ids(&in_a) != [a_new.clone(), a_old.clone()] {
            return Err(Some(format!(
                "list_sessions of workspace {ws_a} listed {:?}: it must list that workspace's \
                 sessions only ({:?}), never another's or one without a workspace",
                ids(&in_a),
                [&a_new, &a_old]
            )));
        }
        if let Some(plant) = plant {
            plant(&garbage, "{ not json")
                .map_err(|e| Some(format!("planting garbage failed: {e}")))?;
            let listed = store
                .list_sessions(Some(std::path::Path::new(&ws_a)))
                .await
                .map_err(|e| {
                    Some(format!(
                        "list_sessions failed with an unreadable record in the store: {e}: one bad \
                     record must not hide the others"
                    ))
                })?;
            let unreadable: Vec<String> = starting_with(
                listed.unreadable.iter().map(|u| u.session_id.as_str()),
                &prefix,
            );
            if ids(&listed) != [a_new.clone(), a_old.clone()] || unreadable != [garbage.clone()] {
                return Err(Some(format!(
                    "with a garbage record in the store, list_sessions listed {:?} and reported \
                     {unreadable:?} as unreadable: it must list the readable sessions and report \
                     the garbage under its key ({garbage:?})",
                    ids(&listed)
                )));
            }
        }
        Ok(())
    }
    .await;
    cleanup(store, &[&a_old, &a_new, &b, &none, &garbage]).await;
    match result {
        Ok(()) => Ok(Ok(())),
        Err(None) => Err(Unsupported),
        Err(Some(message)) => Ok(Err(message)),
    }
}

async fn expire(store: &dyn SessionStore, prefix: &str) -> Result<(), String> {
    let prefix = format!("{prefix}-expire");
    let ids = session_ids(&prefix, ["idle", "recent", "pending", "running", "calls"]);
    let result = async {
        save_new(
            store,
            [
                record(&ids[0], 1, false, 10),
                record(&ids[1], 1, false, EXPIRE_BEFORE),
                record(&ids[2], 1, true, 10),
                running(&ids[3], Some(NOW.saturating_sub(60_000))),
                with_waiting_calls(record(&ids[4], 1, false, 10), &["call_a"]),
            ],
        )
        .await?;
        let expired = store.expire(EXPIRE_BEFORE).await;
        ensure!(
            matches!(expired, Ok(n) if n >= 1),
            "expire gave {}, not the one idle session saved before the limit",
            said(&expired)
        );
        for (id, kept) in ids.iter().zip([false, true, true, true, true]) {
            let loaded = store.load(id).await;
            let found = matches!(loaded, Ok(Some(_)));
            ensure!(
                found == kept,
                "after expire, session `{id}` is {}: expire deletes only sessions with nothing \
                 pending, no running run, saved before the limit ({})",
                if found { "still there" } else { "gone" },
                said(&loaded)
            );
        }
        Ok(())
    }
    .await;
    cleanup(store, &ids.iter().map(String::as_str).collect::<Vec<_>>()).await;
    result
}

async fn unreadable_records(
    store: &dyn SessionStore,
    plant: &Planter,
    prefix: &str,
) -> Result<(), String> {
    let prefix = format!("{prefix}-bad");
    let [healthy, garbage, twin, newer] =
        session_ids(&prefix, ["healthy", "garbage", "twin", "newer"]);
    let result = async {
        let a = record(&healthy, 1, true, 50);
        let saved = store.save(&a, None).await;
        ensure_saved(&format!("saving `{healthy}`"), &saved)?;
        let a_text = serde_json::to_string(&a).map_err(|e| e.to_string())?;
        plant(&garbage, "{ not json").map_err(|e| format!("planting garbage failed: {e}"))?;
        plant(&twin, &a_text).map_err(|e| format!("planting a twin failed: {e}"))?;
        let listing = store.list_pending(NOW).await.map_err(|e| {
            format!("list_pending failed with unreadable records in the store: {e}: one bad record must not hide the others")
        })?;
        let (pending, unreadable, _) = ours(&listing, &prefix);
        ensure!(
            pending == [format!("{healthy}/decision_1")],
            "with a garbage record and one naming another session in the store, list_pending \
             listed {pending:?}: it must list the healthy record once, and nothing else"
        );
        ensure!(
            unreadable == [garbage.clone(), twin.clone()],
            "list_pending reported {unreadable:?} as unreadable: it must report each record it \
             cannot read under its key ({garbage:?}, {twin:?}: garbage, and a record naming \
             session `{healthy}`)"
        );
        for key in [&garbage, &twin] {
            let loaded = store.load(key).await;
            ensure!(
                matches!(&loaded, Err(StoreError::Corrupt { session_id, .. }) if session_id == key),
                "load of the unreadable record `{key}` gave {}, not StoreError::Corrupt naming it",
                said(&loaded)
            );
        }
        let mut future = serde_json::to_value(record(&newer, 1, true, 50)).map_err(|e| e.to_string())?;
        future["schemaVersion"] = json!(SCHEMA_VERSION + 1);
        future["fieldFromTheFuture"] = json!(true);
        plant(&newer, &future.to_string()).map_err(|e| format!("planting a newer record failed: {e}"))?;
        let loaded = store.load(&newer).await;
        ensure!(
            matches!(loaded, Err(StoreError::NewerSchema { .. })),
            "load of a record of a newer schema gave {}, not StoreError::NewerSchema",
            said(&loaded)
        );
        ensure_deletes(store, &garbage, "an unreadable record").await?;
        Ok(())
    }
    .await;
    cleanup(store, &[&healthy, &garbage, &twin, &newer]).await;
    result
}

/// A record as release 0.1.0 wrote it (schema 1): a plan waiting for a decision.
fn schema_1_record(id: &str) -> String {
    json!({
        "schemaVersion": 1,
        "sessionId": id,
        "version": 1,
        "configFingerprint": "conformance",
        "modeId": "plan",
        "messages": [{"role": "user", "content": "Add dark mode"}],
        "runCounter": 1,
        "run": {"runId": "run_1", "state": "suspended"},
        "pending": {
            "runId": "run_1",
            "toolCallId": "call_2",
            "toolName": "submit_plan",
            "suspendPayload": {
                "path": ".agent/plans/add-dark-mode.md",
                "title": "Add dark mode",
                "plan": "1. Read the code.",
                "sha256": "53fac1f8801935b6be525c67ba87dcbc8133fca1e0f3e843838548fa2b0f8b65",
                "targetModeId": "build",
            },
        },
        "lastDecided": null,
        "updatedAt": 60,
    })
    .to_string()
}

async fn migrations(store: &dyn SessionStore, plant: &Planter, prefix: &str) -> Result<(), String> {
    let id = format!("{prefix}-old-schema");
    let result = async {
        plant(&id, &schema_1_record(&id))
            .map_err(|e| format!("planting a schema-1 record failed: {e}"))?;
        let loaded = store.load(&id).await;
        let Ok(Some(old)) = loaded else {
            return Err(format!(
                "load of a record of schema 1 gave {}: an older record must load, migrated",
                said(&loaded)
            ));
        };
        ensure!(
            old.schema_version == SCHEMA_VERSION
                && old.mode_id == "plan"
                && old
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.tool_call_id == "call_2"),
            "a record of schema 1 loaded as schema {} in mode `{}`: it must load migrated to \
             schema {SCHEMA_VERSION} with its mode and pending plan",
            old.schema_version,
            old.mode_id
        );
        let listing = list(store).await?;
        ensure!(
            listing.pending.iter().any(|p| p.session_id == id),
            "the pending plan of a schema-1 record is not listed by list_pending"
        );
        let mut next = old.clone();
        next.version = 2;
        next.pending = None;
        let saved = store.save(&next, Some(1)).await;
        ensure_saved("saving a migrated record at version 2", &saved)?;
        let reloaded = store.load(&id).await;
        ensure!(
            matches!(&reloaded, Ok(Some(r)) if *r == next),
            "after saving the migrated record, a load gave {}",
            said(&reloaded)
        );
        Ok(())
    }
    .await;
    cleanup(store, &[&id]).await;
    result
}
