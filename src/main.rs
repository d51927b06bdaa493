//! The `agent-controller` command: `check` a mode config, `verify` it with the property tests,
//! draw its `graph`, print its `schema`, `run` a session on it, list `pending` plans and
//! `decide` them from a session store.
//!
//! A thin layer over the library: everything here can be done with the public API.

use std::fmt::Display;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agent_controller::deadline::{self, deadline_text};
use agent_controller::diagram::{self, DiagramFormat};
use agent_controller::display::{arguments_line, json_line, neutralize, neutralize_line};
use agent_controller::jail::{self, Jail};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::store::{
    InterruptedRun, PendingKind, PendingSummary, SessionStore, StoreError, check_spec,
    display_spec, open_existing_store, open_store,
};
use agent_controller::terminal::editor::Editor;
use agent_controller::terminal::{
    PromptAnswer, Question, SpinnerModel, StdinLines, Style, allowance_note, ask_tool_call,
    render_tool_call,
};
use agent_controller::tool::SUBMIT_PLAN;
use agent_controller::tool::submit_plan::{self, PlanError};
use agent_controller::{
    AgentController, Decision, DecisionAction, DecisionOutcome, Event, LanguageModel, ModeGraph,
    PendingDecision, RequireApproval, RunOutcome, RunState, Session, SessionError, SessionOptions,
    SuspendPayload, Suspension, ToolRegistry, config, schema,
};
use clap::{Args, Parser, Subcommand};

/// Writes a line to stdout. Once a write fails (a reader that closed stdout, `| head -1`; a full
/// disk) the rest of the output is dropped, but the command still does its work: a decision
/// already saved carries its run on to where it is saved again, never stranded `running`. The
/// error is reported when the command ends ([`Exit::StdoutClosed`]; see [`stdout_failure`]).
macro_rules! say {
    ($($arg:tt)*) => { emit(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Writes a line to stderr; a closed stderr is ignored (the outcome is still in the exit status).
macro_rules! note {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

const DEFAULT_CONFIG: &str = "config/modes.toml";

/// `--model`: the built-in scripted model unless a real one is named.
const MODEL_HELP: &str = "The model: `scripted` (built in, the default) or `openai/MODEL` for an \
OpenAI-compatible endpoint (`OPENAI_API_KEY`, `OPENAI_BASE_URL`; a mode's `defaultModelId` wins; \
`openai` alone uses `OPENAI_MODEL`). Needs the `openai` feature.";

/// The exit statuses, in `--help` (README "Exit status" says the same).
const EXIT_STATUS_HELP: &str = "\
Exit status:
  0    done: the run completed (any plan in it approved), or the command succeeded
  1    runtime error: the model, a tool or the store failed
  2    invalid config or usage (also `check` finding errors; `decide` with a verdict while several
       tool calls wait and no --decision names one; --to or --plan-file with a tool call, --always
       with a plan, or with run or continue)
  3    not approved: the plan (or the tool call decided last) rejected or expired, or the prompt
       dismissed without a store; the mode is unchanged and a waiting tool call did not run
  4    still pending: detached, the prompt dismissed (or `q` at a tool call) with a store, or other
       tool calls of the same reply still wait; decide later with `decide`
  5    decision refused: already decided, lost a race, stale --sha256 (a plan's sha256 or a tool
       call's argsSha256), a --decision that is not pending, changed config, unknown session;
       `continue` refused: no interrupted run, its lease still runs, or another process won
  6    `pending`: some stored records cannot be read; the others are listed, each unreadable one
       is a `warning:` line on stderr (and an {\"unreadable\": ...} line with --json)
  130  interrupted (Ctrl-C while the model works)
  141  stdout closed by its reader (`| head`), or a write to it failed (a full disk): the
       command still did its work (a decided run is carried on and saved) and its output from
       then on was lost; a write error is reported on stderr with the status it would have had";

/// The prompt's grammar, in `run --help` and `decide --help`.
const PROMPT_HELP: &str = "\
The prompt (without --approve or --reject) shows the plan on stderr and reads stdin:
  y, yes       approve (any case), to the first target
  1, 2, ...    when the plan lists several targets (`transitionsTo = [\"build\", \"build-auto\"]`):
  MODE         approve to that listed target, by its number or its mode id
  n, no        reject
  e            edit the plan in $VISUAL or $EDITOR (else vi), see what the edit changed, then:
                 y (or a listed number or mode id) approves the edited text, e edits again,
                 d discards the edit; the approval is pinned to the sha256 of the plan shown
  p            on a revision shown as its diff: show the whole plan
  approve, ok, okay, accept, lgtm, sure, reject, deny, ... (one word that looks like a decision)
               asks again, with a hint
  other text   reject, with the text as feedback (the model revises and submits again)
  end of input, Ctrl-C
               no decision: a stored plan stays pending (exit 4); without a store the run
               ends unapproved and the mode is unchanged (exit 3)
The answer is pinned to the sha256 of the plan shown.

A tool call that waits for approval (the mode's `requireApproval`) is shown with its tool, its
argsSha256 and every argument (pretty-printed JSON, control characters escaped, shortest value
first, the values sharing 60 lines and 4000 characters, a long one cut in its middle); each
waiting call is asked about in turn, also after `run --approve` (which decides plans only), and
the run carries on once all are decided:
  y, yes       run the call
  a            run it, and always allow this tool until the mode changes (a manual switch or an
               approved plan); the other calls of the tool waiting in the reply run with it
  n, no        reject: the call does not run; the model is told it was not approved
  f            reject with feedback, typed on the next line (an empty line goes back)
  other text   reject, with the text as feedback
  q            leave it pending: decide it later with `decide --decision ID` (exit 4 with a store;
               without one the run ends unapproved, exit 3)
  end of input, Ctrl-C
               as q
The answer is pinned to the call's argsSha256.";

#[derive(Debug, Parser)]
#[command(
    name = "agent-controller",
    version,
    about = "Plan/build mode controller for agent harnesses",
    after_help = EXIT_STATUS_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Trace runs, model calls, tool calls, decisions and saves on stderr at this level.
    #[arg(long, global = true, value_enum, default_value_t = LogLevel::Off)]
    log_level: LogLevel,
}

/// Which JSON Schema `schema` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SchemaKind {
    /// The mode config file (`config/modes.schema.json`).
    Config,
    /// A decision a host sends (`config/decision.schema.json`).
    Decision,
    /// One pending decision, as `pending --json` prints it.
    Pending,
    /// The audit record of a settled decision (`decision` in events).
    Decided,
}

/// How much the library's `tracing` spans and events print (`--log-level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Installs a `tracing` subscriber writing to stderr (stdout carries events and results).
fn init_logging(level: LogLevel) {
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::fmt::format::FmtSpan;
    let filter = match level {
        LogLevel::Off => return,
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    };
    // Err only when a subscriber is installed already, which then keeps the job.
    // From debug on, a line when each span closes, with its time.
    let spans = if filter >= LevelFilter::DEBUG {
        FmtSpan::CLOSE
    } else {
        FmtSpan::NONE
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(filter)
        .with_span_events(spans)
        .with_writer(std::io::stderr)
        .try_init();
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a mode config and print its modes, default mode and hand-over edges; on errors,
    /// print every one of them with its source line.
    Check {
        /// The config file.
        #[arg(default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Draw the modes and the hand-over edges (default and planning modes marked).
    Graph {
        /// The config file.
        #[arg(default_value = DEFAULT_CONFIG)]
        config: PathBuf,
        /// The output format.
        #[arg(long, default_value = "mermaid", value_parser = parse_format)]
        format: DiagramFormat,
    },
    /// Print a JSON Schema: of the config format (for editor completion and validation), or of
    /// the JSON a host exchanges: a decision it sends, a `pending --json` line or a decision's
    /// audit record it reads.
    Schema {
        /// Which schema.
        #[arg(value_enum, default_value_t = SchemaKind::Config)]
        of: SchemaKind,
    },
    /// Run one session (with the built-in scripted model, or a real one with --model).
    #[command(after_help = format!("{PROMPT_HELP}\n\n{EXIT_STATUS_HELP}"))]
    Run(RunArgs),
    /// List the plans and the tool calls waiting for a decision in a session store (a tool call
    /// with its tool, every argument on one line, neutralized, the values sharing 200 characters
    /// and a longer value cut in its middle, its argsSha256 and the tools the session always allows), then the interrupted runs (a
    /// run whose process stopped and whose lease ended: `continue` carries it on). A stored
    /// record that cannot be read is not listed: it is a `warning:` line on stderr, and the exit
    /// status is 6.
    #[command(after_help = EXIT_STATUS_HELP)]
    Pending {
        /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = parse_store)]
        store: String,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
        /// Keep going: after the plans pending now, print each new one as it arrives, until
        /// Ctrl-C (a `postgres://` store; it hears about them through LISTEN/NOTIFY).
        #[arg(long)]
        watch: bool,
    },
    /// Decide a pending plan, or a tool call waiting for approval, from a session store, in a
    /// fresh process, and carry the run on. With --approve or --reject and several tool calls
    /// waiting, name one with --decision (else exit 2, listing their ids); without them the
    /// prompt asks about each waiting call in turn.
    #[command(after_help = format!("{PROMPT_HELP}\n\n{EXIT_STATUS_HELP}"))]
    Decide(DecideArgs),
    /// Carry on an interrupted run from a session store, in a fresh process: a run whose process
    /// stopped after a save (killed during `decide`, say), once its lease has ended (`pending`
    /// lists it). Takes the lease first: of racing continuers one wins, the others are refused
    /// (exit 5), as is a run whose lease still runs. Tool calls are never run twice.
    #[command(after_help = format!("{PROMPT_HELP}\n\n{EXIT_STATUS_HELP}"))]
    Continue(ContinueArgs),
    /// Property-test a mode config with the built-in tools: explore every reachable state of a
    /// session and run the random state-machine test against the reference model; print the
    /// coverage (states, transitions, cases, seed). Exit 1 when the controller diverges.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The config file.
    #[arg(default_value = DEFAULT_CONFIG)]
    config: PathBuf,
    /// Random operation sequences to run (default: `PROPTEST_CASES`, else 256).
    #[arg(long)]
    cases: Option<u32>,
    /// The seed of the random test (every run prints its seed: give it to replay a failure).
    #[arg(long)]
    seed: Option<u64>,
    /// Keep failing cases in this file, replayed first next time (default:
    /// proptest-regressions/agent-controller-check.txt).
    #[arg(long)]
    regressions: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct DecideArgs {
    /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, value_parser = parse_store)]
    store: String,
    /// The session whose pending plan or tool call to decide.
    session: String,
    /// Decide only this decision (`decision_N`, as `pending` and the `tool_suspended` event show
    /// it): the pending plan, or one of the tool calls waiting for approval; an id that is not
    /// pending is refused (exit 5) and nothing changes.
    #[arg(long, value_name = "ID")]
    decision: Option<String>,
    #[command(flatten)]
    common: SessionArgs,
}

#[derive(Debug, Args)]
struct ContinueArgs {
    /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, value_parser = parse_store)]
    store: String,
    /// The session whose interrupted run to carry on.
    session: String,
    #[command(flatten)]
    common: SessionArgs,
}

/// Options `run`, `decide` and `continue` share: where the config and workspace are, how plans
/// are decided, how events are printed, which model runs, and the lease of a running run.
#[derive(Debug, Args)]
struct SessionArgs {
    /// The config file [default: config/modes.toml in the workspace].
    #[arg(long)]
    config: Option<PathBuf>,
    /// The workspace the tools work in [`run`: default `.`]. `decide` and `continue` act in the
    /// workspace the session recorded when it started: without this flag they take it from the
    /// record, and this flag naming another directory is refused (exit 2).
    #[arg(long)]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    decision: DecisionArgs,
    /// Print one JSON event per line on stdout.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value = "scripted", help = MODEL_HELP)]
    model: String,
    /// The lease of a run this process carries on, in seconds (renewed while it works): if the
    /// process stops, the run is interrupted once the lease ends, and `continue` carries it on.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_lease)]
    lease: Duration,
}

/// `--lease`: a positive number of seconds (fractions allowed).
fn parse_lease(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err("a lease is a number of seconds above 0, at most 86400".to_owned()),
    }
}

/// The decision flags of `run` and `decide`: a verdict flag takes no value, so a word after it is
/// never taken for feedback (`run --reject "Add dark mode"` plans "Add dark mode").
#[derive(Debug, Args)]
struct DecisionArgs {
    /// Approve the plan without asking (with `decide`: the plan or the tool call it decides; with
    /// `run` and `continue`: every plan, never a tool call, which is asked about at the prompt
    /// or, with a store and no answer, left pending, exit 4).
    #[arg(long, group = "verdict")]
    approve: bool,
    /// Reject the plan without asking (which decision as for --approve).
    #[arg(long, group = "verdict")]
    reject: bool,
    /// A note for the model with --approve or --reject (a rejection with feedback makes the model
    /// revise and submit again).
    #[arg(long, value_name = "TEXT", requires = "verdict")]
    feedback: Option<String>,
    /// Decide only the plan with this SHA-256, or the tool call with this argsSha256 (64 hex
    /// digits, as `pending` and the `tool_suspended` event show it); any other is refused (exit
    /// 5) and nothing changes.
    #[arg(long, value_name = "HASH", value_parser = parse_sha256)]
    sha256: Option<String>,
    /// Who decides, recorded as `decidedBy` in the session record and the events (default: the
    /// OS user from $USER or $LOGNAME, else `unknown`); also for answers typed at the prompt.
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    /// With --approve: hand the plan over to this mode instead of the first target. It must be
    /// one of the targets the planning mode's `transitionsTo` lists (as `pending` and the
    /// `tool_suspended` event show them); any other is refused (exit 5) and nothing changes.
    #[arg(long, value_name = "MODE", requires = "approve")]
    to: Option<String>,
    /// With --approve: approve the plan as edited in this file (a regular file, at most 1 MiB,
    /// UTF-8, not blank): the next mode receives its text; --sha256 still names the plan shown.
    #[arg(long, value_name = "FILE", requires = "approve")]
    plan_file: Option<PathBuf>,
    /// With `decide --approve` of a tool call that waits for approval: also allow its tool until the
    /// mode changes (a manual switch or an approved plan): the other calls of the tool waiting in
    /// the reply are approved with it, and later calls run without waiting. A plan cannot be
    /// always allowed: `decide --always` on a plan is refused (exit 2) and nothing changes.
    #[arg(long, requires = "approve", conflicts_with = "reject")]
    always: bool,
    /// The text of --plan-file, read and checked once before anything is decided.
    #[arg(skip)]
    edited: Option<String>,
}

impl DecisionArgs {
    /// Whether a verdict flag (--approve, --reject) decides, so the prompt never asks.
    fn decides(&self) -> bool {
        self.approve || self.reject
    }

    /// The decision the flags give for `pending`, or `None` when the prompt asks: the verdict
    /// and the feedback, then for a plan the `--sha256` pin, `--to` and `--plan-file`, and for
    /// a tool call `--always`, pinned to the call's `argsSha256`. Call [`DecisionArgs::check`]
    /// first.
    fn fixed(&self, pending: &PendingDecision) -> Option<Decision> {
        let mut decision = if self.approve {
            Decision::approve()
        } else if self.reject {
            Decision::reject()
        } else {
            return None;
        };
        decision.feedback = self
            .feedback
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_owned);
        match pending {
            PendingDecision::ToolCall(call) => {
                if self.always {
                    decision = decision.always_allow();
                }
                decision = decision.with_sha256(call.args_sha256());
            }
            _ => {
                if let Some(sha256) = &self.sha256 {
                    decision = decision.with_sha256(sha256);
                }
                if let Some(to) = &self.to {
                    decision = decision.to(to);
                }
                if let Some(text) = &self.edited {
                    decision = decision.with_plan(text);
                }
            }
        }
        Some(self.signed(decision))
    }

    /// Reads and checks --plan-file (a regular file, at most 1 MiB, UTF-8, not blank) into the
    /// edited plan, before anything is decided.
    fn read_plan_file(&mut self) -> Result<(), Failure> {
        let Some(path) = &self.plan_file else {
            return Ok(());
        };
        let shown = path.display().to_string();
        let refused =
            |e: &dyn Display| Failure::invalid(neutralize_line(&format!("--plan-file: {e}")));
        let bytes = jail::read_file(path, submit_plan::MAX_PLAN_BYTES).map_err(|e| match e {
            jail::JailError::TooLarge { len, .. } => {
                refused(&PlanError::TooLarge(shown.clone(), len))
            }
            other => refused(&format!("plan file {other}")),
        })?;
        submit_plan::capture_plan(&shown, &bytes).map_err(|e| refused(&e))?;
        let text = String::from_utf8(bytes).map_err(|_| refused(&PlanError::NotUtf8(shown)))?;
        self.edited = Some(text);
        Ok(())
    }

    /// Refuses the flags that do not go with `pending` before anything is shown or decided:
    /// `--always` on a plan, `--to` or `--plan-file` on a tool call (exit 2), and a `--sha256`
    /// that names other content than what waits (exit 5; the library's pin check,
    /// [`PendingDecision::check_sha256`]).
    fn check(&self, pending: &PendingDecision) -> Result<(), Failure> {
        let id = neutralize_line(pending.decision_id());
        let flag = match pending {
            PendingDecision::ToolCall(_) if self.to.is_some() => Some("--to"),
            PendingDecision::ToolCall(_) if self.plan_file.is_some() => Some("--plan-file"),
            _ => None,
        };
        if let Some(flag) = flag {
            return Err(Failure::invalid(format!(
                "{flag} goes with a plan, and decision {id} is a tool call ({}): nothing was decided",
                neutralize_line(pending.tool_name())
            )));
        }
        if self.always && pending.as_plan().is_some() {
            return Err(Failure::invalid(format!(
                "--always goes with a tool call, and decision {id} is a plan: nothing was decided"
            )));
        }
        let Some(pinned) = self.sha256.as_ref() else {
            return Ok(());
        };
        if pending.check_sha256(pinned).is_ok() {
            return Ok(());
        }
        let sha256 = neutralize_line(pending.sha256());
        Err(Failure::refused(match pending {
            PendingDecision::ToolCall(call) => format!(
                "the tool call {id} ({}) has argsSha256 {sha256}, not {pinned}: it is not the call you meant; nothing was decided",
                neutralize_line(call.tool_name()),
            ),
            _ => format!(
                "the pending plan has sha256 {sha256}, not {pinned}: it is not the plan you meant; nothing was decided"
            ),
        }))
    }

    /// Refuses (exit 2) `--always` for `command` (`run`, `continue`), whose verdict flags decide
    /// plans only: a tool call is always allowed with `decide --always` or `a` at the prompt.
    fn check_plans_only(&self, command: &str) -> Result<(), Failure> {
        if self.always {
            return Err(Failure::invalid(format!(
                "--always goes with `decide` of a tool call: the --approve and --reject of `{command}` decide plans only (a tool call is asked about at the prompt, where `a` always allows its tool)"
            )));
        }
        Ok(())
    }

    /// `decision` with who decided: `--by`, else the OS user, else `unknown`.
    fn signed(&self, decision: Decision) -> Decision {
        let by = self.by.clone().unwrap_or_else(|| {
            ["USER", "LOGNAME"]
                .iter()
                .filter_map(|key| std::env::var(key).ok())
                .find(|name| !name.trim().is_empty())
                .unwrap_or_else(|| "unknown".to_owned())
        });
        decision.decided_by(by)
    }
}

/// `--store`: a spec [`check_spec`] accepts, so one that would lose the session is a usage
/// error (exit 2) before anything runs.
fn parse_store(text: &str) -> Result<String, String> {
    match check_spec(text) {
        Ok(()) => Ok(text.to_owned()),
        Err(StoreError::InvalidSpec { reason, .. }) => Err(reason),
        Err(other) => Err(other.to_string()),
    }
}

fn parse_sha256(text: &str) -> Result<String, String> {
    let hash = text.trim().to_ascii_lowercase();
    if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hash)
    } else {
        Err("a SHA-256 is 64 hex digits".to_owned())
    }
}

fn parse_format(text: &str) -> Result<DiagramFormat, String> {
    text.parse()
        .map_err(|_| format!("unknown format `{text}`: use mermaid or dot"))
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    common: SessionArgs,
    /// The mode to start in (default: the config's default mode).
    #[arg(long)]
    mode: Option<String>,
    /// A plan file to submit as is (copied into the plans directory when outside it).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Persist the session in this store (a directory, `sqlite:FILE`, or
    /// `postgres://USER@HOST:PORT/DB`; throw-away databases such as `sqlite::memory:` are
    /// refused).
    #[arg(long, value_parser = parse_store)]
    store: Option<String>,
    /// With --store: stop once a plan is suspended and print the session and run ids.
    #[arg(long, requires = "store")]
    detach: bool,
    /// The user's message.
    #[arg(default_value = "Plan the next change")]
    prompt: String,
}

/// How a command ended; the process exit status (`--help`, README "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// The run completed (any plan in it approved), or the command succeeded.
    Done,
    /// The model, a tool or the store failed.
    RuntimeError,
    /// An invalid config, or a usage error (clap uses 2 as well).
    Invalid,
    /// A plan was rejected, or the prompt dismissed without a store: the mode is unchanged.
    NotApproved,
    /// The plan is still pending in the store: detached, or the prompt dismissed.
    Pending,
    /// A decision was refused: already decided, lost race, stale sha256, changed config, unknown
    /// session.
    Refused,
    /// `pending` listed what it could read, and some records could not be read.
    Unreadable,
    /// Ctrl-C while the model works.
    Interrupted,
    /// Stdout was closed by its reader, or a write to it failed; the command still did its work.
    StdoutClosed,
}

impl Exit {
    fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::RuntimeError => 1,
            Exit::Invalid => 2,
            Exit::NotApproved => 3,
            Exit::Pending => 4,
            Exit::Refused => 5,
            Exit::Unreadable => 6,
            Exit::Interrupted => 130,
            Exit::StdoutClosed => 141,
        }
    }

    /// What the status means, in a few words (as `--help` lists it).
    fn meaning(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::RuntimeError => "runtime error",
            Exit::Invalid => "invalid config or usage",
            Exit::NotApproved => "not approved",
            Exit::Pending => "still pending",
            Exit::Refused => "decision refused",
            Exit::Unreadable => "some records unreadable",
            Exit::Interrupted => "interrupted",
            Exit::StdoutClosed => "stdout failed",
        }
    }
}

/// A command that could not do its job: the message for stderr and the exit status.
#[derive(Debug)]
struct Failure {
    exit: Exit,
    message: String,
}

impl Failure {
    fn new(exit: Exit, message: impl Display) -> Self {
        Self {
            exit,
            message: message.to_string(),
        }
    }
    fn runtime(message: impl Display) -> Self {
        Self::new(Exit::RuntimeError, message)
    }
    fn invalid(message: impl Display) -> Self {
        Self::new(Exit::Invalid, message)
    }
    fn refused(message: impl Display) -> Self {
        Self::new(Exit::Refused, message)
    }
}

impl From<SessionError> for Failure {
    fn from(error: SessionError) -> Self {
        let exit = match &error {
            SessionError::AlreadyDecided(_)
            | SessionError::Sha256Mismatch { .. }
            | SessionError::ArgsSha256Mismatch { .. }
            | SessionError::ConfigChanged(_)
            | SessionError::UnknownSession(_)
            | SessionError::UnknownRun(_)
            | SessionError::UnknownToolCall { .. }
            | SessionError::UnknownDecision(_)
            | SessionError::NotSuspended(_)
            | SessionError::TargetNotAllowed { .. }
            | SessionError::SessionExists(_)
            | SessionError::NotInterrupted { .. }
            | SessionError::LeaseHeld { .. }
            | SessionError::LeaseLost { .. }
            | SessionError::WorkspaceGone { .. }
            | SessionError::WorkspaceReplaced { .. } => Exit::Refused,
            e if e.is_conflict() => Exit::Refused,
            // An expired plan counts as rejected: not approved, whatever the decision was.
            SessionError::Expired { .. } => Exit::NotApproved,
            SessionError::UnknownMode(_)
            | SessionError::MalformedDecision(_)
            | SessionError::InvalidSessionId(_)
            | SessionError::WrongWorkspace { .. }
            | SessionError::NoWorkspaceRecorded { .. }
            | SessionError::Store(StoreError::InvalidId(_)) => Exit::Invalid,
            _ => Exit::RuntimeError,
        };
        Self::new(exit, error)
    }
}

type Outcome = Result<Exit, Failure>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level);
    let result = match cli.command {
        Command::Check { config } => check(&config),
        Command::Graph { config, format } => graph(&config, format),
        Command::Schema { of } => {
            let text = match of {
                SchemaKind::Config => config::schema_json(),
                SchemaKind::Decision => schema::to_json(&schema::decision()),
                SchemaKind::Pending => schema::to_json(&schema::pending_summary()),
                SchemaKind::Decided => schema::to_json(&schema::decided_record()),
            };
            emit(format_args!("{text}"));
            Ok(Exit::Done)
        }
        Command::Run(args) => run(args),
        Command::Pending {
            store,
            json,
            watch: true,
        } => watch_pending(&store, json),
        Command::Pending { store, json, .. } => pending(&store, json),
        Command::Decide(args) => decide(args),
        Command::Continue(args) => continue_run(args),
        Command::Verify(args) => verify(args),
    };
    let exit = match result {
        Ok(exit) => exit,
        Err(failure) => {
            note!("error: {}", neutralize(&failure.message));
            failure.exit
        }
    };
    let exit = match stdout_failure() {
        Some(error) => report_stdout_failure(error, exit),
        None => exit,
    };
    ExitCode::from(exit.code())
}

/// The first error writing to stdout, if any: from then on output is dropped ([`emit`]).
static STDOUT_FAILURE: std::sync::OnceLock<std::io::Error> = std::sync::OnceLock::new();

/// The error that made stdout fail, once a write failed.
fn stdout_failure() -> Option<&'static std::io::Error> {
    STDOUT_FAILURE.get()
}

/// Writes to stdout; see [`say!`]. After a failed write nothing more is written (and the
/// failure is kept for the end of the command), so a run in progress is never cut off by its
/// output.
fn emit(text: std::fmt::Arguments<'_>) {
    if stdout_failure().is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        let _ = STDOUT_FAILURE.set(e);
    }
}

/// The exit of a command whose output failed: [`Exit::StdoutClosed`], after saying on stderr
/// what failed and how the command itself ended (a closed pipe stays quiet, as `| head` expects).
fn report_stdout_failure(error: &std::io::Error, exit: Exit) -> Exit {
    if error.kind() != std::io::ErrorKind::BrokenPipe {
        note!(
            "error: cannot write to stdout: {error}; the output from then on was lost, but the command did its work (it ended with exit status {}: {})",
            exit.code(),
            exit.meaning()
        );
    }
    Exit::StdoutClosed
}

fn load(path: &Path) -> Result<(ModeGraph, ToolRegistry), Failure> {
    let graph = config::load(path).map_err(Failure::invalid)?;
    let tools = ToolRegistry::with_workspace_tools();
    let names: Vec<&str> = tools.names().collect();
    if let Some(unknown) = graph.unknown_tools_among(&names).into_iter().next() {
        return Err(Failure::invalid(unknown));
    }
    Ok((graph, tools))
}

fn check(path: &Path) -> Outcome {
    let origin = path.display().to_string();
    let text = config::read(path).map_err(|e| Failure::invalid(neutralize(&e.to_string())))?;
    let tools = ToolRegistry::with_workspace_tools();
    let names: Vec<&str> = tools.names().collect();
    let errors = config::check_with_tool_names(&text, &origin, &names);
    let warnings = config::warnings_with_tools(&text, &origin, &tools);
    let mut reports: Vec<(&str, &config::ConfigError)> = errors
        .iter()
        .map(|e| ("error", e))
        .chain(warnings.iter().map(|w| ("warning", w)))
        .collect();
    reports.sort_by_key(|(_, e)| e.location());
    for (level, report) in &reports {
        note!("{level}: {}\n", neutralize(&report.to_string()));
    }
    let origin = neutralize_line(&origin);
    if !errors.is_empty() {
        note!("{origin}: {}", counted(errors.len(), "error"));
        return Ok(Exit::Invalid);
    }
    let (graph, _) = load(path)?;
    let default = graph.default_mode_id();
    let warned = if warnings.is_empty() {
        String::new()
    } else {
        format!(", {}", counted(warnings.len(), "warning"))
    };
    say!("{origin}: ok, {}{warned}", counted(graph.len(), "mode"));
    for id in graph.ids() {
        let mode = graph.mode(id);
        let mut marks = Vec::new();
        if id == default {
            marks.push("default");
        }
        if mode.is_planning() {
            marks.push("planning");
        }
        let tools = match mode.available_tools() {
            Some(list) => list.iter().map(|t| &**t).collect::<Vec<_>>().join(", "),
            None if mode.is_planning() => "all read-only and plan tools".to_owned(),
            None => "all".to_owned(),
        };
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!(" [{}]", marks.join(", "))
        };
        let approval = match mode.require_approval() {
            RequireApproval::None => String::new(),
            RequireApproval::All => "  requireApproval: every tool".to_owned(),
            RequireApproval::Tools(list) => format!(
                "  requireApproval: {}",
                list.iter().map(|t| &**t).collect::<Vec<_>>().join(", ")
            ),
        };
        let timeout = mode
            .approval_timeout()
            .map(|t| format!("  approvalTimeout: {t}"))
            .unwrap_or_default();
        say!(
            "  {} ({}){marks}  tools: {}{}{timeout}",
            mode.id(),
            neutralize_line(mode.name()),
            neutralize_line(&tools),
            neutralize_line(&approval)
        );
    }
    say!("default mode: {}", graph.default_mode().id());
    say!("hand-over edges (on approval):");
    for (from, to) in graph.transition_edges() {
        let chosen = if to == graph.transition_target(from) {
            ""
        } else {
            " (when chosen at approval)"
        };
        say!(
            "  {} -> {}{chosen}",
            graph.mode(from).id(),
            graph.mode(to).id()
        );
    }
    Ok(Exit::Done)
}

/// `verify`: the testing kit's check with the built-in tools; a divergence exits 1, an invalid
/// config 2.
fn verify(args: VerifyArgs) -> Outcome {
    use agent_controller::testing::{Check, CheckError};
    let mut check = Check::new(&args.config);
    if let Some(cases) = args.cases {
        check = check.cases(cases);
    }
    if let Some(seed) = args.seed {
        check = check.seed(seed);
    }
    if let Some(file) = args.regressions {
        check = check.regressions(file);
    }
    let result = check.run(|setup| {
        setup
            .builder()
            .tools(ToolRegistry::with_workspace_tools())
            .build()
    });
    match result {
        Ok(report) => {
            say!("{report}");
            Ok(Exit::Done)
        }
        Err(CheckError::Failed(report)) => {
            say!("{report}");
            Ok(Exit::RuntimeError)
        }
        Err(CheckError::Config(e)) => Err(Failure::invalid(e)),
        Err(e) => Err(Failure::runtime(e)),
    }
}

/// `1 mode`, `2 modes`.
fn counted(count: usize, noun: &str) -> String {
    let s = if count == 1 { "" } else { "s" };
    format!("{count} {noun}{s}")
}

fn graph(path: &Path, format: DiagramFormat) -> Outcome {
    let (graph, _) = load(path)?;
    emit(format_args!("{}", diagram::render(&graph, format)));
    Ok(Exit::Done)
}

/// The model `--model` names, behind a spinner (quiet with `--json` or when stdout is piped).
fn model_for(
    spec: &str,
    json: bool,
    plan: Option<&Path>,
    scripted: ScriptedModel,
) -> Result<Arc<dyn LanguageModel>, Failure> {
    let spin = !json && std::io::stdout().is_terminal();
    let (provider, name) = match spec.split_once('/') {
        Some((provider, name)) => (provider, Some(name)),
        None => (spec, None),
    };
    match provider {
        "scripted" => Ok(Arc::new(SpinnerModel::new(scripted, spin))),
        "openai" => openai_model(name, plan).map(|m| Arc::new(SpinnerModel::new(m, spin)) as _),
        "anthropic" => {
            use agent_controller::model::anthropic::{AnthropicModel, AnthropicSettings};
            if plan.is_some() {
                return Err(Failure::invalid(
                    "--plan is for the scripted model: a real model writes its own plan",
                ));
            }
            let mut settings = AnthropicSettings::from_env();
            if let Some(name) = name.filter(|n| !n.is_empty()) {
                settings = settings.default_model(name);
            }
            let model = AnthropicModel::new(settings).map_err(|e| Failure::invalid(e.message()))?;
            Ok(Arc::new(SpinnerModel::new(model, spin)))
        }
        other => Err(Failure::invalid(format!(
            "unknown model provider `{other}`: use `scripted` or `openai/MODEL`"
        ))),
    }
}

#[cfg(feature = "openai")]
fn openai_model(
    name: Option<&str>,
    plan: Option<&Path>,
) -> Result<agent_controller::model::openai::OpenAiModel, Failure> {
    use agent_controller::model::openai::{OpenAiModel, OpenAiSettings};
    if plan.is_some() {
        return Err(Failure::invalid(
            "--plan is for the scripted model: a real model writes its own plan",
        ));
    }
    let mut settings = OpenAiSettings::from_env();
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        settings = settings.default_model(name);
    }
    OpenAiModel::new(settings).map_err(|e| Failure::invalid(e.message()))
}

#[cfg(not(feature = "openai"))]
fn openai_model(_: Option<&str>, _: Option<&Path>) -> Result<ScriptedModel, Failure> {
    Err(Failure::invalid(
        "this build has no `openai` provider: rebuild with `--features openai`",
    ))
}

/// Places the plan the scripted model will submit, when it cannot write one itself: the file
/// `--plan` names, checked as `submit_plan` checks a plan (`.md`, a regular file of at most 1 MiB,
/// UTF-8, not blank) before anything is copied, or a plan written from the prompt. Never
/// replaces a file in the plans directory (a pending plan of another session, or anything else):
/// a taken name gets a fresh one (`name-2.md`).
fn place_plan(
    args: &RunArgs,
    controller: &AgentController,
    start_offers_write_plan: bool,
    start_offers_submit: bool,
) -> Result<Option<String>, Failure> {
    if let Some(plan) = &args.plan {
        let shown = plan.display().to_string();
        let refused = |e: &dyn Display| Failure::invalid(neutralize_line(&format!("--plan: {e}")));
        if !start_offers_submit {
            let why = format!(
                "{shown}: the start mode is not a planning mode (it does not offer {SUBMIT_PLAN}); start in one with --mode"
            );
            return Err(refused(&why));
        }
        if !submit_plan::is_markdown(&shown) {
            return Err(refused(&PlanError::NotMarkdown(shown)));
        }
        let bytes = jail::read_file(plan, submit_plan::MAX_PLAN_BYTES).map_err(|e| match e {
            jail::JailError::TooLarge { len, .. } => {
                refused(&PlanError::TooLarge(shown.clone(), len))
            }
            other => refused(&format!("plan file {other}")),
        })?;
        submit_plan::capture_plan(&shown, &bytes).map_err(|e| refused(&e))?;
        if let Some(inside) = inside_plans_dir(plan, controller) {
            return Ok(Some(inside));
        }
        let name = plan
            .file_name()
            .ok_or_else(|| Failure::invalid("--plan names no file"))?;
        let copied = write_into_plans_dir(controller, Path::new(name), &bytes)?;
        note!(
            "(copied {} to {})",
            neutralize_line(&shown),
            neutralize_line(&copied)
        );
        return Ok(Some(copied));
    }
    if start_offers_write_plan {
        return Ok(None);
    }
    let name = ScriptedModel::plan_file_name(&args.prompt);
    let text = ScriptedModel::plan_for(&args.prompt, &[]);
    write_into_plans_dir(controller, Path::new(&name), text.as_bytes()).map(Some)
}

/// `plan`'s path relative to the workspace when it already lies inside the plans directory.
fn inside_plans_dir(plan: &Path, controller: &AgentController) -> Option<String> {
    let source = plan.canonicalize().ok()?;
    let dir = controller.plans_dir().canonicalize().ok()?;
    let rest = source.strip_prefix(&dir).ok()?;
    let plans_rel = controller.modes().plans_dir();
    Some(plans_rel.join(rest).display().to_string())
}

/// Writes `bytes` under a fresh name in the plans directory (through its directory handle);
/// returns the path relative to the workspace.
fn write_into_plans_dir(
    controller: &AgentController,
    name: &Path,
    bytes: &[u8],
) -> Result<String, Failure> {
    let plans_rel = controller.modes().plans_dir();
    let label = format!("the plans directory {}", plans_rel.display());
    let written = Jail::open(controller.workspace())
        .and_then(|ws| ws.subdir(plans_rel, true, &label))
        .and_then(|plans| plans.write_new(name, bytes))
        .map_err(|e| {
            Failure::runtime(neutralize_line(&format!(
                "cannot write the plan into {}: {e}",
                plans_rel.display()
            )))
        })?;
    Ok(plans_rel.join(written).display().to_string())
}

/// The store `pending` and `decide` read: one that does not exist is a usage error (exit 2),
/// not an empty store created on the spot.
fn open_existing(spec: &str) -> Result<Arc<dyn SessionStore>, Failure> {
    open_existing_store(spec).map_err(|e| match e {
        StoreError::Missing(_) => Failure::invalid(neutralize_line(&e.to_string())),
        other => Failure::runtime(other),
    })
}

/// `--workspace` must be a directory that exists: checked before anything runs (exit 2).
fn check_workspace(workspace: &Path) -> Result<(), Failure> {
    Jail::open(workspace).map(drop).map_err(|e| {
        Failure::invalid(neutralize_line(&format!(
            "--workspace must be an existing directory: {e}"
        )))
    })
}

/// The config file `run`, `decide` and `continue` load: `--config`, else `config/modes.toml`
/// in the workspace they act in.
fn config_path(common: &SessionArgs, workspace: &Path) -> PathBuf {
    match &common.config {
        Some(config) => config.clone(),
        None if workspace == Path::new(".") => PathBuf::from(DEFAULT_CONFIG),
        None => workspace.join(DEFAULT_CONFIG),
    }
}

/// The one controller setup of `run`, `decide` and `continue`: the loaded config and its tools,
/// the workspace, the config file protected from the tools, the model, and the store with the
/// lease of the runs this process carries on.
fn controller(
    common: &SessionArgs,
    workspace: &Path,
    config: &Path,
    (graph, tools): (ModeGraph, ToolRegistry),
    model: Arc<dyn LanguageModel>,
    store: Option<Arc<dyn SessionStore>>,
) -> Result<AgentController, Failure> {
    let mut builder = AgentController::builder(graph, model)
        .tools(tools)
        .workspace(workspace)
        .protected_path(config);
    if let Some(store) = store {
        builder = builder.store(store).lease_duration(common.lease);
    }
    builder.build().map_err(Failure::invalid)
}

/// The workspace `decide` and `continue` act in: the one session `id` recorded when it started
/// (its canonical path). `--workspace` (`named`) may name it again, and naming another directory
/// is refused (exit 2, naming both); a recorded workspace that is gone or is another directory
/// now is refused (exit 5). A record from before workspaces were recorded needs `--workspace`
/// (exit 2 without it), and adopts it. An unknown session is refused (exit 5).
fn recorded_workspace(
    store: &dyn SessionStore,
    id: &str,
    named: Option<&Path>,
) -> Result<PathBuf, Failure> {
    let record = runtime()?
        .block_on(store.load(id))
        .map_err(|e| Failure::from(SessionError::from(e)))?
        .ok_or_else(|| Failure::from(SessionError::UnknownSession(id.to_owned())))?;
    let Some(recorded) = record.workspace else {
        return named.map(Path::to_path_buf).ok_or_else(|| {
            Failure::invalid(format!(
                "session {} was saved by an older release and records no workspace: name the directory it works in with --workspace DIR (it is recorded from then on); nothing was done",
                neutralize_line(id)
            ))
        });
    };
    let shown = |path: &Path| neutralize_line(&path.display().to_string()).to_string();
    if let Some(named) = named {
        let canonical = std::fs::canonicalize(named).unwrap_or_else(|_| named.to_path_buf());
        if canonical != recorded.path {
            return Err(Failure::invalid(format!(
                "--workspace {} is not the workspace of session {}: it works in {}, where it started; nothing was done",
                shown(&canonical),
                neutralize_line(id),
                shown(&recorded.path)
            )));
        }
    }
    recorded.check(&recorded.path).map_err(|mismatch| {
        Failure::refused(format!(
            "session {} cannot act in its workspace: {}; nothing was done",
            neutralize_line(id),
            neutralize_line(&mismatch.to_string())
        ))
    })?;
    Ok(recorded.path)
}

fn run(mut args: RunArgs) -> Outcome {
    let workspace = args
        .common
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."));
    check_workspace(&workspace)?;
    args.common.decision.check_plans_only("run")?;
    args.common.decision.read_plan_file()?;
    let config = config_path(&args.common, &workspace);
    let (graph, tools) = load(&config)?;
    let start = match &args.mode {
        Some(id) => graph
            .get(id)
            .ok_or_else(|| Failure::invalid(format!("unknown mode `{}`", neutralize_line(id))))?,
        None => graph.default_mode_id(),
    };
    let scripted = args.common.model == "scripted";
    // A probe controller tells whether the start mode offers write_plan; building is cheap.
    let probe = controller(
        &args.common,
        &workspace,
        &config,
        (graph.clone(), tools.clone()),
        Arc::new(ScriptedModel::new()),
        None,
    )?;
    let offers_write_plan = probe
        .tool_specs(start)
        .iter()
        .any(|s| &*s.name == "write_plan");
    let offers_submit = probe
        .tool_specs(start)
        .iter()
        .any(|s| &*s.name == SUBMIT_PLAN);
    let plan_path = if scripted && (offers_submit || args.plan.is_some()) {
        place_plan(&args, &probe, offers_write_plan, offers_submit)?
    } else {
        None
    };
    let scripted_model = match plan_path {
        Some(path) => ScriptedModel::with_plan_path(path),
        None => ScriptedModel::new(),
    };
    let model = model_for(
        &args.common.model,
        args.common.json,
        args.plan.as_deref(),
        scripted_model,
    )?;
    let store = match &args.store {
        Some(spec) => Some(open_store(spec).map_err(Failure::runtime)?),
        None => None,
    };
    let controller = controller(
        &args.common,
        &workspace,
        &config,
        (graph.clone(), tools),
        model,
        store,
    )?;
    let mut options =
        SessionOptions::new().on_event(event_printer(args.common.json, graph.clone()));
    if let Some(mode) = &args.mode {
        options = options.mode(mode.clone());
    }
    let runtime = runtime()?;
    runtime.block_on(async {
        let mut session = controller.start_session(options).await?;
        // Ctrl-C while the model works stops the run; the session keeps the mode it is in now.
        let outcome = tokio::select! {
            outcome = session.send_message(args.prompt.clone()) => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&mut session).await);
        };
        let outcome = outcome?;
        // The verdict flags decide plans only: a tool call is asked about at the prompt.
        let mut prompt = Prompt::new(graph);
        let mut decider = Decider {
            flags: &args.common.decision,
            prompt: Some(&mut prompt),
            flags_decide_tool_calls: false,
            json: args.common.json,
            store: args.store.as_deref(),
            detach: args.detach,
            last: None,
        };
        let exit = decider.until_done(&mut session, outcome).await?;
        // A `--plan` that was never approved (refused, or rejected) is not a completed job.
        Ok(match (exit, &args.plan, decider.last) {
            (Exit::Done, Some(_), None) => Exit::NotApproved,
            _ => exit,
        })
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::runtime)
}

/// Ends what a Ctrl-C outside the prompt interrupted and says where it left the session. The
/// run's future was dropped, so [`Session::settle`] records the run as aborted (a result for
/// each open tool call, `agent_end`) and saves it: a stored session is left consistent, not as
/// it was before the run.
async fn interrupted(session: &mut Session) -> Exit {
    if let Err(error) = session.settle().await {
        note!("\ninterrupted: the aborted run could not be saved: {error}");
    }
    note!("\ninterrupted: the mode stays `{}`", session.mode().id());
    Exit::Interrupted
}

/// The approval prompt on the terminal: the plan rendered on stderr, answers from stdin, edits
/// in the user's editor.
struct Prompt {
    style: Style,
    input: StdinLines,
    graph: ModeGraph,
    editor: Editor,
}

impl Prompt {
    fn new(graph: ModeGraph) -> Self {
        Self {
            style: Style::for_stderr(),
            input: StdinLines::spawn(),
            graph,
            editor: Editor::from_env(),
        }
    }

    /// Shows what waits (a plan, or tool call `nth` of the `of` that wait) and asks about it;
    /// `None` when end of input or Ctrl-C dismissed the prompt, or `q` left a tool call (no
    /// decision). A decision is pinned to the sha256 of what was shown.
    async fn ask(
        &mut self,
        session: &Session,
        pending: &PendingDecision,
        nth: usize,
        of: usize,
    ) -> Option<Decision> {
        let mut stderr = std::io::stderr();
        let answer = match pending {
            PendingDecision::ToolCall(call) => {
                note!(
                    "\n{}",
                    render_tool_call(&self.style, call.payload(), nth, of)
                );
                if let Some(workspace) = &call.payload().workspace {
                    note!(
                        "workspace: {} (where the call runs if approved)",
                        neutralize_line(&workspace.display().to_string())
                    );
                }
                // `a` approves the other calls of the tool that wait in the reply too.
                let others = waiting(session)
                    .iter()
                    .filter(|c| {
                        c.tool_name() == call.tool_name() && c.decision_id() != call.decision_id()
                    })
                    .count();
                if let Some(text) = allowance_note(call.tool_name(), others) {
                    note!("{text}");
                }
                ask_tool_call(
                    &self.style,
                    call.tool_name(),
                    call.args_sha256(),
                    &mut self.input,
                    &mut stderr,
                    tokio::signal::ctrl_c(),
                )
                .await
            }
            _ => {
                let payload = pending.as_plan()?.payload();
                self.plan_question(session, payload, &mut stderr).await
            }
        };
        if let (Some(notice), Some(_)) = (answer.notice(session.mode().id()), pending.as_plan()) {
            note!("{notice}");
            return None;
        }
        let what = match answer {
            PromptAnswer::Decided(decision) => return Some(decision),
            PromptAnswer::EndOfInput => "end of input",
            PromptAnswer::Interrupted => "interrupted",
            PromptAnswer::Left => "left for later",
        };
        note!(
            "{what}: the tool call {} ({}) is not decided and does not run",
            neutralize_line(pending.decision_id()),
            neutralize_line(pending.tool_name())
        );
        None
    }

    /// Shows the plan of `payload` (or what changed since its last revision) and asks the
    /// plan's question.
    async fn plan_question(
        &mut self,
        session: &Session,
        payload: &SuspendPayload,
        stderr: &mut std::io::Stderr,
    ) -> PromptAnswer {
        let graph = &self.graph;
        let mut targets: Vec<&agent_controller::Mode> = payload
            .target_mode_ids
            .iter()
            .filter_map(|id| graph.get(id).map(|t| graph.mode(t)))
            .collect();
        if targets.is_empty() {
            let target = graph
                .get(&payload.target_mode_id)
                .map_or_else(|| session.mode(), |id| graph.mode(id));
            targets.push(target);
        }
        let whole = self
            .style
            .render_plan(&payload.submission.title, &payload.submission.plan);
        let mut origin = plan_origin(&payload.submission.path, &payload.submission.sha256);
        if let Some(note) = deadline_note(payload) {
            origin = format!("{origin}\n{}", neutralize_line(&note));
        }
        origin = format!(
            "{origin}\nworkspace: {} (where an approval carries the run on)",
            neutralize_line(&session.workspace().display().to_string())
        );
        let sha256 = &payload.submission.sha256;
        let plan_text = submit_plan::revision_text(&payload.submission);
        let mut question = Question::new(&self.style, &targets, sha256)
            .editable(&plan_text, &self.editor)
            .ending_allowances(session.always_allowed());
        match (&payload.diff, &payload.previous_sha256) {
            // A revision: what changed since the previous one; `p` shows it whole.
            (Some(diff), Some(previous)) => {
                note!(
                    "\nrevision {} of the plan \"{}\", changes since revision {} (sha256 {}...):\n{}\n{origin}",
                    payload.revision,
                    neutralize_line(&payload.submission.title),
                    payload.revision.saturating_sub(1),
                    neutralize_line(short_sha256(previous)),
                    self.style.render_diff(diff)
                );
                question = question.whole_plan(&whole);
            }
            _ => note!("\n{whole}\n{origin}"),
        }
        question
            .ask(&mut self.input, stderr, tokio::signal::ctrl_c())
            .await
    }
}

/// Decides suspended plans until the run ends: with the decision flags, else with the prompt.
struct Decider<'a> {
    flags: &'a DecisionArgs,
    prompt: Option<&'a mut Prompt>,
    /// Whether the verdict flags decide tool calls too (`decide`, which names the call), or only
    /// plans (`run`, `continue`: the user never saw the calls the run goes on to make, so each is
    /// asked about at the prompt, or left pending).
    flags_decide_tool_calls: bool,
    json: bool,
    /// The store spec, when the session is stored.
    store: Option<&'a str>,
    /// Stop at the first suspension (the plan stays pending in the store).
    detach: bool,
    /// The last decision taken in this process.
    last: Option<DecisionAction>,
}

impl Decider<'_> {
    /// Answers suspended plans and tool calls waiting for approval until the run ends and tells
    /// how it ended. What waits stays pending (exit 4) when detaching, when there is neither a
    /// prompt nor a flag decision (a revision after `decide`), or when the prompt is dismissed
    /// (or `q` at a tool call) with a store; a prompt dismissed without a store aborts the run,
    /// not approved (exit 3). Ctrl-C while the model works stops the run.
    async fn until_done(&mut self, session: &mut Session, mut outcome: RunOutcome) -> Outcome {
        let out_style = Style::for_stdout();
        while outcome.state() == RunState::Suspended {
            if self.detach {
                return Ok(self.leave(session));
            }
            let waiting = waiting(session);
            outcome = match self.decide_each(session, &waiting).await? {
                Ok(next) => next,
                Err(exit) => return Ok(exit),
            };
        }
        finish(session, self.json, &out_style);
        Ok(match outcome {
            RunOutcome::Failed { error, .. } => {
                note!("error: {}", neutralize(error.message()));
                Exit::RuntimeError
            }
            _ if self.last == Some(DecisionAction::Rejected) => Exit::NotApproved,
            _ => Exit::Done,
        })
    }

    /// Applies one decision and returns the run's next outcome, or `Err(exit)` when Ctrl-C
    /// interrupted the run it carried on.
    async fn apply(
        &mut self,
        session: &mut Session,
        decision_id: &str,
        decision: Decision,
    ) -> Result<Result<RunOutcome, Exit>, Failure> {
        let next = tokio::select! {
            next = session.decide(decision_id, decision) => Some(next),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(next) = next else {
            return Ok(Err(interrupted(session).await));
        };
        next.map(Ok).map_err(|e| match self.store {
            Some(store) => lost_race(e, store),
            None => e.into(),
        })
    }

    /// Decides `pending` (a plan, or tool calls waiting for approval) one by one, in the
    /// model's order: with the flags (a plan's always; a tool call's only when
    /// `flags_decide_tool_calls`), else at the prompt. Returns the outcome after the last
    /// decision (the run carries on once all of its waiting calls are decided), or `Err(exit)`
    /// when one was left undecided (pending with a store, exit 4; without one the run is
    /// aborted, exit 3) or Ctrl-C interrupted the run.
    async fn decide_each(
        &mut self,
        session: &mut Session,
        pending: &[PendingDecision],
    ) -> Result<Result<RunOutcome, Exit>, Failure> {
        let out_style = Style::for_stdout();
        let mut outcome = None;
        for (at, waiting) in pending.iter().enumerate() {
            // An "always allow" on an earlier call of this tool decided it: not asked again.
            if let Some(allowance) = allowed_by(session, waiting.decision_id()) {
                note!(
                    "tool call {} of {} ({}, decision {}) runs: always allowed by decision {}",
                    at + 1,
                    pending.len(),
                    neutralize_line(waiting.tool_name()),
                    neutralize_line(waiting.decision_id()),
                    neutralize_line(&allowance)
                );
                continue;
            }
            let flags_decide = waiting.as_plan().is_some() || self.flags_decide_tool_calls;
            let fixed = if flags_decide {
                self.flags.check(waiting)?;
                self.flags.fixed(waiting)
            } else {
                None
            };
            let decision = match fixed {
                Some(decision) => decision,
                None => {
                    let Some(prompt) = self.prompt.as_deref_mut() else {
                        return Ok(Err(self.leave(session)));
                    };
                    match prompt.ask(session, waiting, at + 1, pending.len()).await {
                        Some(decision) => self.flags.signed(decision),
                        None if self.store.is_some() => {
                            return Ok(Err(self.leave(session)));
                        }
                        None => {
                            session.abort().await?;
                            finish(session, self.json, &out_style);
                            return Ok(Err(Exit::NotApproved));
                        }
                    }
                }
            };
            self.last = Some(decision.action);
            match self.apply(session, waiting.decision_id(), decision).await? {
                Ok(next) => outcome = Some(next),
                Err(exit) => return Ok(Err(exit)),
            }
        }
        match outcome {
            Some(next) => Ok(Ok(next)),
            // Nothing waited (another process decided them): say what is left.
            None => Ok(Err(self.leave(session))),
        }
    }

    /// Says what waits (the plan, or the tool calls) and how to decide it later; it stays
    /// pending in the store.
    fn leave(&self, session: &Session) -> Exit {
        let store = self.store.unwrap_or("STORE");
        let waiting = waiting(session);
        let run_id = waiting
            .first()
            .map_or_else(String::new, |c| neutralize_line(c.run_id()).into_owned());
        let plan = waiting.first().and_then(PendingDecision::as_plan);
        if !self.json {
            match plan {
                Some(plan) => say!(
                    "suspended: session {} run {run_id} decision {}",
                    session.id(),
                    neutralize_line(plan.decision_id())
                ),
                None => {
                    let listed: Vec<String> = waiting
                        .iter()
                        .map(|c| {
                            format!(
                                "{} ({})",
                                neutralize_line(c.decision_id()),
                                neutralize_line(c.tool_name())
                            )
                        })
                        .collect();
                    say!(
                        "suspended: session {} run {run_id} tool calls wait for approval: {}",
                        session.id(),
                        listed.join(", ")
                    );
                }
            }
        }
        let (what, flags) = match (plan, waiting.len()) {
            (Some(_), _) => (
                "the plan stays pending; decide later",
                "--approve [--to MODE] | --reject",
            ),
            (None, 1) => (
                "the tool call stays pending; decide it later",
                "--approve [--always] | --reject",
            ),
            (None, _) => (
                "the tool calls stay pending; decide each later",
                "--approve [--always] | --reject",
            ),
        };
        let id = match waiting.as_slice() {
            [one] => neutralize_line(one.decision_id()).into_owned(),
            _ => "ID".to_owned(),
        };
        note!(
            "{what} with: agent-controller decide --store {} {} --decision {id} ({flags}) [--feedback TEXT]",
            neutralize_line(&display_spec(store)),
            session.id()
        );
        Exit::Pending
    }
}

/// The decision id of the "always allow" that decided tool call `decision_id` with another call
/// of its reply ([`agent_controller::DecidedRecord::allowed_by`]), while the run still waits or
/// once it carried on; `None` when no allowance decided it.
fn allowed_by(session: &Session, decision_id: &str) -> Option<String> {
    let waiting = session
        .pending()
        .iter()
        .filter(|c| c.decision_id() == decision_id)
        .filter_map(PendingDecision::decision);
    let settled = session
        .decision_history()
        .iter()
        .filter(|d| d.decision_id == decision_id);
    waiting.chain(settled).find_map(|d| d.allowed_by.clone())
}

/// What `session` waits on and is not decided yet (the plan, or tool calls in the model's
/// order).
fn waiting(session: &Session) -> Vec<PendingDecision> {
    session
        .pending()
        .iter()
        .filter(|c| c.is_waiting())
        .cloned()
        .collect()
}

/// `pending`: the readable plans on stdout, one `warning:` line on stderr per record that
/// cannot be read (with `--json`, also an `{"unreadable": {...}}` line on stdout), and exit 6
/// when there was any.
fn pending(spec: &str, json: bool) -> Outcome {
    let store = open_existing(spec)?;
    let listing = runtime()?
        .block_on(async {
            // Plans past their deadline expire first (each once, whoever looks first).
            let expired = deadline::expire_due(&*store, SystemTime::now()).await?;
            for e in &expired {
                // A plan, or a tool call that waited for approval.
                let what = match &e.decision.tool_name {
                    Some(tool) => format!("the `{}` tool call", neutralize_line(tool)),
                    None => "the plan".to_owned(),
                };
                note!(
                    "expired: session {} decision {}: no decision by {}, so {what} counts as rejected",
                    neutralize_line(&e.session_id),
                    neutralize_line(&e.decision.decision_id),
                    neutralize_line(e.decision.decided_at.as_deref().unwrap_or("its deadline"))
                );
            }
            store.list_pending().await
        })
        .map_err(Failure::runtime)?;
    for p in &listing.pending {
        say!("{}", pending_line(p, json)?);
    }
    for run in &listing.interrupted {
        say!("{}", interrupted_line(run, spec, json)?);
    }
    for record in &listing.unreadable {
        warn_unreadable(&record.session_id, Some(&record.location), &record.reason);
        if json {
            let line = json_line(&serde_json::json!({ "unreadable": record }))
                .map_err(Failure::runtime)?;
            say!("{line}");
        }
    }
    if listing.is_healthy() {
        if !json && listing.pending.is_empty() && listing.interrupted.is_empty() {
            note!("no pending plans or tool calls");
        }
        Ok(Exit::Done)
    } else {
        Ok(Exit::Unreadable)
    }
}

/// The `warning:` line of a record `pending` cannot read.
fn warn_unreadable(session_id: &str, location: Option<&str>, reason: &str) {
    let location = location.map_or(String::new(), |l| format!(" ({})", neutralize_line(l)));
    note!(
        "warning: session `{}`{location} cannot be read, not listed: {}",
        neutralize_line(session_id),
        neutralize_line(reason)
    );
}

/// One interrupted run as `pending` prints it: `{"interrupted": {...}}`, or tab-separated fields
/// ending in the command that carries it on.
fn interrupted_line(run: &InterruptedRun, spec: &str, json: bool) -> Result<String, Failure> {
    if json {
        return json_line(&serde_json::json!({ "interrupted": run })).map_err(Failure::runtime);
    }
    Ok(format!(
        "{}\t{}\tinterrupted\t{}\towner {}{}\tcontinue with: agent-controller continue --store {} {}",
        neutralize_line(&run.session_id),
        neutralize_line(&run.run_id),
        neutralize_line(&run.mode_id),
        neutralize_line(run.owner.as_deref().unwrap_or("unknown")),
        run.workspace.as_ref().map_or(String::new(), |w| format!(
            "\tworkspace {}",
            neutralize_line(&w.display().to_string())
        )),
        neutralize_line(&display_spec(spec)),
        neutralize_line(&run.session_id),
    ))
}

/// How many characters of a tool call's argument values `pending` and the event lines show,
/// shared among the values (every argument is shown, a long value cut in its middle and the cut
/// counted: [`arguments_line`]; `pending --json` and `--json` events have them whole).
const PENDING_ARGS_MAX_CHARS: usize = 200;

/// One pending plan or tool call as `pending` prints it: a JSON object, or tab-separated fields
/// (a tool call's arguments on one line: [`arguments_line`]).
fn pending_line(p: &PendingSummary, json: bool) -> Result<String, Failure> {
    if json {
        json_line(p).map_err(Failure::runtime)
    } else if p.kind == PendingKind::ToolCall {
        let args = p
            .args
            .as_ref()
            .map_or(String::new(), |a| arguments_line(a, PENDING_ARGS_MAX_CHARS));
        let allowed = if p.always_allowed.is_empty() {
            String::new()
        } else {
            format!(
                "\talways allowed: {}",
                neutralize_line(&p.always_allowed.join(", "))
            )
        };
        let deadline = p.deadline_at_ms.map_or(String::new(), |at| {
            format!("\tdeadline {}", deadline_text(at))
        });
        Ok(format!(
            "{}\t{}\t{}\t{}\ttool call {}\t{}\targsSha256 {}{}{allowed}{deadline}",
            neutralize_line(&p.session_id),
            neutralize_line(&p.run_id),
            neutralize_line(&p.decision_id),
            neutralize_line(&p.mode_id),
            neutralize_line(p.tool_name.as_deref().unwrap_or_default()),
            args,
            neutralize_line(p.args_sha256.as_deref().unwrap_or(&p.sha256)),
            workspace_field(p),
        ))
    } else {
        let deadline = p.deadline_at_ms.map_or(String::new(), |at| {
            format!("\tdeadline {}", deadline_text(at))
        });
        Ok(format!(
            "{}\t{}\t{}\t{} -> {}\t{}\t{}{}{deadline}",
            neutralize_line(&p.session_id),
            neutralize_line(&p.run_id),
            neutralize_line(&p.decision_id),
            neutralize_line(&p.mode_id),
            neutralize_line(&targets_text(&p.target_mode_id, &p.target_mode_ids)),
            short_sha256(&p.sha256),
            neutralize_line(&p.title),
            workspace_field(p),
        ))
    }
}

/// The field of a `pending` line after the plan's title or the call's `argsSha256`:
/// `workspace PATH`, where the decision acts (none for a record from before workspaces were
/// recorded).
fn workspace_field(p: &PendingSummary) -> String {
    p.workspace.as_ref().map_or(String::new(), |w| {
        format!("\tworkspace {}", neutralize_line(&w.display().to_string()))
    })
}

/// `pending --watch`: the plans pending now, then each new one as its save is committed, until
/// Ctrl-C (exit 0) or a closed stdout.
#[cfg(feature = "postgres")]
fn watch_pending(spec: &str, json: bool) -> Outcome {
    use agent_controller::store::postgres::{PostgresConfig, PostgresStore, is_postgres_url};
    use futures_util::StreamExt;

    if !is_postgres_url(spec) {
        return Err(Failure::invalid(format!(
            "--watch needs a postgres:// store: `{}` has no change notifications",
            neutralize_line(&display_spec(spec))
        )));
    }
    let config = PostgresConfig::from_url(spec).map_err(Failure::invalid)?;
    let store = PostgresStore::open(config).map_err(Failure::runtime)?;
    runtime()?.block_on(async {
        let plans = store.watch_pending(true).await.map_err(Failure::runtime)?;
        let mut plans = std::pin::pin!(plans);
        note!(
            "watching {} for pending plans (Ctrl-C to stop)",
            neutralize_line(&display_spec(spec))
        );
        loop {
            let plan = tokio::select! {
                plan = plans.next() => plan,
                _ = tokio::signal::ctrl_c() => return Ok(Exit::Done),
            };
            match plan {
                Some(Ok(plan)) => {
                    say!("{}", pending_line(&plan, json)?);
                    // Nobody reads any more: stop watching (main reports it).
                    if stdout_failure().is_some() {
                        return Ok(Exit::Done);
                    }
                }
                Some(Err(StoreError::Corrupt {
                    session_id,
                    message,
                })) => warn_unreadable(&session_id, None, &message),
                Some(Err(e)) => return Err(Failure::runtime(e)),
                None => return Ok(Exit::Done),
            }
        }
    })
}

#[cfg(not(feature = "postgres"))]
fn watch_pending(_: &str, _: bool) -> Outcome {
    Err(Failure::invalid(
        "--watch needs a postgres:// store, and this build has no PostgreSQL support: rebuild with `--features postgres`",
    ))
}

fn decide(mut args: DecideArgs) -> Outcome {
    if let Some(named) = &args.common.workspace {
        check_workspace(named)?;
    }
    args.common.decision.read_plan_file()?;
    let store = open_existing(&args.store)?;
    let workspace = recorded_workspace(&*store, &args.session, args.common.workspace.as_deref())?;
    let config = config_path(&args.common, &workspace);
    let (graph, tools) = load(&config)?;
    let model = model_for(
        &args.common.model,
        args.common.json,
        None,
        ScriptedModel::new(),
    )?;
    let controller = controller(
        &args.common,
        &workspace,
        &config,
        (graph.clone(), tools),
        model,
        Some(store),
    )?;
    let json = args.common.json;
    let flags = &args.common.decision;
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone()));
        let mut session = controller.restore_session(&args.session, options).await?;
        let idle = DecisionArgs {
            approve: false,
            reject: false,
            feedback: None,
            sha256: None,
            by: None,
            to: None,
            plan_file: None,
            always: false,
            edited: None,
        };
        let waiting = waiting(&session);
        if waiting.is_empty() {
            if let Some(expired) = expired_now(&session, args.decision.as_deref()) {
                return Err(expired);
            }
            return Err(Failure::refused(format!(
                "session {} has nothing pending (already decided?)",
                neutralize_line(&args.session)
            )));
        }
        let chosen = choose(&args, &waiting)?;
        for pending in &chosen {
            flags.check(pending)?;
        }
        let mut prompt = (!flags.decides()).then(|| Prompt::new(graph));
        let mut decider = Decider {
            flags,
            prompt: prompt.as_mut(),
            flags_decide_tool_calls: true,
            json,
            store: Some(&args.store),
            detach: false,
            last: None,
        };
        let outcome = match decider.decide_each(&mut session, &chosen).await? {
            Ok(outcome) => outcome,
            Err(exit) => return Ok(exit),
        };
        // What the run asks next (other calls still waiting, a plan resubmitted after feedback)
        // is a new decision: it waits for the next `decide`.
        decider.flags = &idle;
        decider.prompt = None;
        decider.until_done(&mut session, outcome).await
    })
}

/// What `decide` decides among `waiting`: the one `--decision` names; else with a verdict flag
/// the only one waiting (more than one is a usage error, exit 2, listing their ids: name one
/// with `--decision`); else (the prompt) each in turn. An id that is not waiting is refused
/// (exit 5).
fn choose(args: &DecideArgs, waiting: &[PendingDecision]) -> Result<Vec<PendingDecision>, Failure> {
    let listed = || {
        waiting
            .iter()
            .map(|c| match c {
                PendingDecision::ToolCall(call) => format!(
                    "{} ({}, argsSha256 {})",
                    neutralize_line(call.decision_id()),
                    neutralize_line(call.tool_name()),
                    neutralize_line(call.args_sha256())
                ),
                _ => format!("`{}`", neutralize_line(c.decision_id())),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let plan = waiting.iter().any(|p| p.as_plan().is_some());
    match args.decision.as_deref() {
        Some(id) => match waiting.iter().find(|c| c.decision_id() == id) {
            Some(pending) => Ok(vec![pending.clone()]),
            None if plan => Err(Failure::refused(format!(
                "session {} has no pending decision `{}`: the pending one is {}; nothing was decided",
                neutralize_line(&args.session),
                neutralize_line(id),
                listed()
            ))),
            None => Err(Failure::refused(format!(
                "session {} has no pending decision `{}`: the tool calls waiting are {}; nothing was decided",
                neutralize_line(&args.session),
                neutralize_line(id),
                listed()
            ))),
        },
        None if waiting.len() > 1 && args.common.decision.decides() => {
            Err(Failure::invalid(format!(
                "session {} has {} tool calls waiting for approval: name the one to decide with --decision ID: {}; nothing was decided",
                neutralize_line(&args.session),
                waiting.len(),
                listed()
            )))
        }
        None => Ok(waiting.to_vec()),
    }
}

/// The refusal of `decide` when the plan it would decide expired (its deadline passed before
/// any decision): the latest settled decision (or the one `--decision` names) is an expiry.
fn expired_now(session: &Session, decision: Option<&str>) -> Option<Failure> {
    let history = session.decision_history();
    let record = match decision {
        Some(id) => history.iter().rfind(|d| d.decision_id == id)?,
        None => history.last()?,
    };
    (record.outcome == Some(DecisionOutcome::Expired)).then(|| {
        let error = SessionError::Expired {
            decision_id: record.decision_id.clone(),
            deadline_at: record.decided_at.clone().unwrap_or_default(),
            tool_name: record.tool_name.clone(),
        };
        Failure::from(error)
    })
}

/// `continue`: restores the session, takes its interrupted run over and carries it on; plans it
/// submits are decided as `run` decides them (the flags, else the prompt; with neither they stay
/// pending).
fn continue_run(mut args: ContinueArgs) -> Outcome {
    args.common.decision.check_plans_only("continue")?;
    if let Some(named) = &args.common.workspace {
        check_workspace(named)?;
    }
    args.common.decision.read_plan_file()?;
    let store = open_store(&args.store).map_err(Failure::runtime)?;
    let workspace = recorded_workspace(&*store, &args.session, args.common.workspace.as_deref())?;
    let config = config_path(&args.common, &workspace);
    let (graph, tools) = load(&config)?;
    let json = args.common.json;
    let model = model_for(&args.common.model, json, None, ScriptedModel::new())?;
    let controller = controller(
        &args.common,
        &workspace,
        &config,
        (graph.clone(), tools),
        model,
        Some(store),
    )?;
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone()));
        let mut session = controller.restore_session(&args.session, options).await?;
        let outcome = tokio::select! {
            outcome = session.continue_run() => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&mut session).await);
        };
        let outcome = outcome.map_err(|e| lost_continue(e, &args.store))?;
        // The verdict flags decide plans only: a tool call is asked about at the prompt.
        let mut prompt = Prompt::new(graph);
        let mut decider = Decider {
            flags: &args.common.decision,
            prompt: Some(&mut prompt),
            flags_decide_tool_calls: false,
            json,
            store: Some(&args.store),
            detach: false,
            last: None,
        };
        decider.until_done(&mut session, outcome).await
    })
}

/// A `continue` that lost to another writer (another continuer took the run first) says so;
/// nothing changed.
fn lost_continue(error: SessionError, store: &str) -> Failure {
    if !error.is_conflict() {
        return error.into();
    }
    Failure::refused(format!(
        "{error}: another process carried the run on (or changed the session) after it was loaded here, so nothing was done; see the store with: agent-controller pending --store {}",
        neutralize_line(&display_spec(store))
    ))
}

/// The targets of a pending plan as one field: `build`, or `build | build-auto` when the user
/// may choose (the plain approval's first).
fn targets_text(target: &str, targets: &[impl AsRef<str>]) -> String {
    if targets.len() > 1 {
        targets
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(" | ")
    } else {
        target.to_owned()
    }
}

/// A decision that lost to another writer (a decision or revision saved after this process
/// loaded the session) says so and what to do; nothing was decided.
fn lost_race(error: SessionError, store: &str) -> Failure {
    if !error.is_conflict() {
        return error.into();
    }
    Failure::refused(format!(
        "{error}: the plan was decided or revised by someone else after it was loaded here, so this decision was not applied; see what is pending now with: agent-controller pending --store {}",
        neutralize_line(&display_spec(store))
    ))
}

fn short_sha256(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}

/// Where the shown plan came from, so the person knows what approving binds to.
fn plan_origin(path: &str, sha256: &str) -> String {
    format!(
        "(plan file {}, sha256 {}...)",
        neutralize_line(path),
        neutralize_line(short_sha256(sha256))
    )
}

/// When a plan with a deadline expires, for people: `(decide by 2026-12-01T18:30:00Z,
/// approvalTimeout 24h; after that it counts as rejected)`; `None` without a deadline.
fn deadline_note(payload: &SuspendPayload) -> Option<String> {
    deadline_note_of(payload.approval_timeout.as_deref(), payload.deadline_at_ms)
}

/// [`deadline_note`] of a deadline and the `approvalTimeout` it came from (a plan's or a tool
/// call's).
fn deadline_note_of(approval_timeout: Option<&str>, deadline_at_ms: Option<u64>) -> Option<String> {
    let at = deadline_at_ms?;
    let timeout = approval_timeout.map_or(String::new(), |t| format!(", approvalTimeout {t}"));
    Some(format!(
        "(decide by {}{timeout}; after that it counts as rejected)",
        deadline_text(at)
    ))
}

/// The closing line: the mode the session ends in.
fn finish(session: &Session, json: bool, style: &Style) {
    if !json {
        if style.is_colored() {
            say!("mode: {}", style.mode_label(session.mode()));
        } else {
            say!("mode: {}", session.mode().id());
        }
    }
}

/// The event subscriber of `run` and `decide`: JSON lines, or readable lines where modes show as
/// their coloured labels on a terminal. Text from the model, tools and files is neutralised.
fn event_printer(json: bool, graph: ModeGraph) -> impl FnMut(&Event) + Send + 'static {
    let style = Style::for_stdout();
    let mut started: Vec<Arc<str>> = Vec::new();
    move |event| {
        // A run resumed after a decision starts again with the same id: say "resumed".
        let resumed = match event {
            Event::AgentStart { run_id, .. } if started.contains(run_id) => true,
            Event::AgentStart { run_id, .. } => {
                started.push(run_id.clone());
                false
            }
            _ => false,
        };
        print_event(event, json, &graph, &style, resumed)
    }
}

fn print_event(event: &Event, json: bool, graph: &ModeGraph, style: &Style, resumed: bool) {
    if json {
        if let Ok(line) = json_line(event) {
            say!("{line}");
        }
        return;
    }
    if let Some(line) = event_line(event, graph, style, resumed) {
        say!("{line}");
    }
}

/// One event as a readable line; model-, tool- and file-derived text through [`neutralize_line`].
fn event_line(event: &Event, graph: &ModeGraph, style: &Style, resumed: bool) -> Option<String> {
    // On a terminal, modes show as their coloured labels; piped output keeps the bare ids.
    let mode = |id: &str| match graph.get(id) {
        Some(m) if style.is_colored() => style.mode_label(graph.mode(m)),
        _ => neutralize_line(id).into_owned(),
    };
    let line = |text: &str| neutralize_line(text).into_owned();
    Some(match event {
        Event::SessionStarted {
            session_id,
            mode_id,
        } => format!(
            "session {} started in mode {}",
            line(session_id),
            mode(mode_id)
        ),
        Event::AgentStart { run_id, mode_id } => {
            let verb = if resumed { "resumed" } else { "started" };
            format!("[{}] {verb} in mode {}", line(run_id), mode(mode_id))
        }
        Event::AssistantMessage { text, .. } => format!("model: {}", line(text)),
        Event::ToolStart {
            tool_name, args, ..
        } => format!(
            "tool {} {}",
            line(tool_name),
            arguments_line(args, PENDING_ARGS_MAX_CHARS)
        ),
        Event::ToolSuspended {
            suspend_payload: Suspension::ToolCall(call),
            ..
        } => {
            let by = deadline_note_of(call.approval_timeout.as_deref(), call.deadline_at_ms)
                .map_or(String::new(), |note| format!(" {}", line(&note)));
            format!(
                "tool call waits for approval: {} {} (decision {}, argsSha256 {}){by}",
                line(&call.tool_name),
                arguments_line(&call.args, PENDING_ARGS_MAX_CHARS),
                line(&call.decision_id),
                line(&call.args_sha256)
            )
        }
        Event::ToolSuspended {
            suspend_payload: Suspension::Plan(suspend_payload),
            ..
        } => {
            let choice = match suspend_payload.target_mode_ids.as_slice() {
                [_, _, ..] => format!(
                    " (approve to: {})",
                    line(&targets_text(
                        &suspend_payload.target_mode_id,
                        &suspend_payload.target_mode_ids
                    ))
                ),
                _ => String::new(),
            };
            let by = deadline_note(suspend_payload)
                .map_or(String::new(), |note| format!(" {}", line(&note)));
            format!(
                "plan submitted: \"{}\" ({}), sha256 {}; waiting for a decision{choice}{by}",
                line(&suspend_payload.submission.title),
                line(&suspend_payload.submission.path),
                line(&suspend_payload.submission.sha256)
            )
        }
        Event::ToolEnd {
            tool_name,
            result,
            is_error,
            decision,
            ..
        } => {
            let status = if *is_error { "error" } else { "ok" };
            let first = result.lines().next().unwrap_or("");
            // An approved edit says so: the first line reads the same for the plan as submitted.
            let edited = decision
                .as_ref()
                .and_then(|d| d.approved_sha256.as_deref())
                .map(|sha| format!(" (the edited plan, sha256 {}...)", line(short_sha256(sha))))
                .unwrap_or_default();
            format!("tool {} {status}: {}{edited}", line(tool_name), line(first))
        }
        Event::ModeChanged {
            mode_id,
            previous_mode_id,
            reason,
        } => format!(
            "mode changed: {} -> {} ({reason})",
            mode(previous_mode_id),
            mode(mode_id)
        ),
        Event::ToolSuspensionCancelled {
            tool_name, reason, ..
        } => format!("{} cancelled ({reason}): not approved", line(tool_name)),
        Event::AgentEnd { run_id, reason } => format!("[{}] ended: {reason}", line(run_id)),
        Event::Error { message } => format!("error: {}", line(message)),
        _ => return None,
    })
}
