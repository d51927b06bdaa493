//! The command line: the commands, their flags and the parsers of flag values (clap types).

use std::path::PathBuf;
use std::time::Duration;

use agent_controller::allowance::{AllowancePattern, AllowanceScope};
use agent_controller::comment::PlanComment;
use agent_controller::diagram::DiagramFormat;
use agent_controller::model::ModelSpec;
use agent_controller::store::{StoreError, check_spec};
use clap::{Args, Parser, Subcommand};

pub(crate) const DEFAULT_CONFIG: &str = "config/modes.toml";

/// `--model` of `decide`, `continue` and `switch`: without it, the model the session ran with.
pub(crate) const SESSION_MODEL_HELP: &str = "`decide` and `continue` without it run with the model the session's `run --model` named (kept in \
its record), else the scripted one.";

/// `--model`: the built-in scripted model unless a real one is named.
pub(crate) const MODEL_HELP: &str = "The model: `scripted` (built in, the default), `openai/MODEL` for an \
OpenAI-compatible endpoint (`OPENAI_API_KEY`, `OPENAI_BASE_URL`; a mode's `defaultModelId` wins; \
`openai` alone uses `OPENAI_MODEL`; needs the `openai` feature), or `anthropic/MODEL` for the \
Anthropic API (`ANTHROPIC_API_KEY`; `anthropic` alone uses `ANTHROPIC_MODEL`).";

/// The exit statuses, in `--help` (the guide, `guide::cli`, "Exit status", says the same).
pub(crate) const EXIT_STATUS_HELP: &str = "\
Exit status:
  0    done: the run completed (any plan in it approved), or the command succeeded
  1    runtime error: the model, a tool or the store failed; `verify`: the setup failed (a
       config naming a tool of its host: stub it with --tool NAME)
  2    invalid config or usage (also `check` finding errors; `decide` with a verdict while several
       tool calls wait and no --decision names one; --to or --plan-file with a tool call, --always
       with a plan, or with run or continue)
  3    not approved: the plan (or the tool call decided last) rejected or expired, or the prompt
       dismissed without a store; the mode is unchanged and a waiting tool call did not run
  4    still pending: detached, the prompt dismissed (or `q` at a tool call) with a store, or other
       tool calls of the same reply still wait; decide later with `decide`
  5    decision refused: already decided, lost a race, stale --sha256 (a plan's sha256 or a tool
       call's argsSha256), a --decision that is not pending, changed config, unknown session;
       `continue` refused: no interrupted run, its lease still runs, or another process won;
       `report`: the session has no plan report
  6    `pending`: some stored records cannot be read; the others are listed, each unreadable one
       is a `warning:` line on stderr (and an {\"unreadable\": ...} line with --json)
  7    `verify`: the controller diverged from the reference model (the counterexample and how
       to replay it are printed)
  130  interrupted (Ctrl-C while the model works)
  141  stdout closed by its reader (`| head`), or a write to it failed (a full disk): the
       command still did its work (a decided run is carried on and saved) and its output from
       then on was lost; a write error is reported on stderr with the status it would have had";

/// The prompt's grammar, in `run --help` and `decide --help`.
pub(crate) const PROMPT_HELP: &str = "\
The prompt (without --approve or --reject) shows the plan on stderr and reads stdin:
  y, yes       approve (any case), to the first target
  1, 2, ...    when the plan lists several targets (`transitionsTo = [\"build\", \"build-auto\"]`):
  MODE         approve to that listed target, by its number or its mode id
  n, no        reject
  e            edit the plan in $VISUAL or $EDITOR (else vi), see what the edit changed, then:
                 y (or a listed number or mode id) approves the edited text, e edits again,
                 d discards the edit; the approval is pinned to the sha256 of the plan shown
  p            on a revision shown as its diff: show the whole plan (a revision is shown as
               its diff only when this prompt showed the one before; else whole, then the diff)
  c            show the plan with its lines numbered
  c LINE TEXT  keep a comment on that line; n (or feedback) then rejects with every comment
               kept (the model gets each with the line it quotes); d drops them
  m MODEL      approve (y or a target) with this model for the next mode (a --model spec,
               as --model-for-next takes it; one this build cannot open is refused when
               typed, and the prompt asks again); m alone goes back to the session's model
  s MODE, switch MODE
               switch to another mode by hand without approving (MODE typed exactly): the
               plan counts as not approved and the model is told (exit 3, in the new mode)
  approve, ok, okay, accept, lgtm, sure, reject, deny, ... (one word that looks like a decision)
               asks again, with a hint
  2, 1,3, ...  numbers alone (the habit of a numbered question) that choose no listed target:
               asks again, with a hint; never feedback
  other text   reject, with the text as feedback (the model revises and submits again)
  end of input, Ctrl-C
               no decision: a stored plan stays pending (exit 4); without a store the run
               ends unapproved and the mode is unchanged (exit 3)
The answer is pinned to the sha256 of the plan shown.

A tool call that waits for approval (the mode's `requireApproval`) is shown with its tool, its
argsSha256 and its arguments (pretty-printed JSON, control characters escaped, shortest value
first, the names and values sharing 60 lines and 4000 characters, a long one cut in its middle,
those with no room left out, and a last line saying how much is not shown); each
waiting call is asked about in turn, also after `run --approve` (which decides plans only), and
the run carries on once all are decided:
  y, yes       run the call
  a            run it, and always allow this tool until the mode changes (a manual switch or an
               approved plan); it approves this call only: the other calls waiting in the reply
               are each shown and asked about, and the tool's calls in later replies run unasked
  n, no        reject: the call does not run; the model is told it was not approved
  f            reject with feedback, typed on the next line (an empty line goes back)
  v            print every argument whole (escaped, nothing cut), then ask again
  other text   reject, with the text as feedback
  q            leave it pending: decide it later with `decide --decision ID` (exit 4 with a store;
               without one the run ends unapproved, exit 3)
  end of input, Ctrl-C
               as q
The answer is pinned to the call's argsSha256.

A question of the model (`ask_user`) is shown with its options numbered, every line of it behind
`│ `, the model's words; `decide --answer TEXT` (repeat it for several choices) or
`--answer-json JSON` answer it without the prompt, `--reject` declines it:
  2            a question with options: pick option 2 (its label is the answer); an
               option's exact label picks it too, and wins: when a label is itself a number
               (`1`, `2`, `10`), a number is that label, never a position
  1,3          a multi-select question: pick options 1 and 3 (each once)
  any text     a question without options: the answer (a blank line asks again)
  end of input, Ctrl-C
               no answer: with a store the question stays pending (exit 4); without one the
               run ends and the model is told the user did not answer (exit 3)
The answer is pinned to the question's payloadSha256.

At every prompt, a line holding control characters (an arrow key, another escape sequence) or
bytes that are not UTF-8 is no answer: the prompt says so and asks again.";

#[derive(Debug, Parser)]
#[command(
    name = "agent-controller",
    version,
    about = "Plan/build mode controller for agent harnesses",
    after_help = EXIT_STATUS_HELP
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Trace runs, model calls, tool calls, decisions and saves on stderr at this level.
    #[arg(long, global = true, value_enum, default_value_t = LogLevel::Off)]
    pub(crate) log_level: LogLevel,
    /// Skip the user's config file ($XDG_CONFIG_HOME/agent-controller/modes.toml): the
    /// project's, its local modes.local.toml and the managed file are read.
    #[arg(long, global = true)]
    pub(crate) no_user_config: bool,
    /// Read this config file alone, without the user's or a local file (for tests and CI);
    /// the managed file ($AGENT_CONTROLLER_MANAGED_CONFIG, else
    /// /etc/agent-controller/managed.toml) still applies: a managed policy never vanishes.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) only: Option<PathBuf>,
}

/// Which JSON Schema `schema` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SchemaKind {
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
pub(crate) enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate a mode config and print its modes, default mode and hand-over edges; on errors,
    /// print every one of them with its source line.
    Check {
        /// The config file.
        #[arg(default_value = DEFAULT_CONFIG)]
        config: PathBuf,
        /// Also start the config's MCP servers (in the current directory, their root) and list
        /// what each mode would offer; a tool a mode lists that its server lacks is an error.
        #[arg(long)]
        connect: bool,
        /// Print the merged config instead (the user's file, the project's, its local
        /// modes.local.toml and the managed file), each line after the file:line it came from.
        #[arg(long)]
        origin: bool,
    },
    /// Say what a mode would do with one tool call, and each step of why, without running
    /// anything: not offered (availableTools), refused by rule N (at its file:line:col), asks
    /// (an `ask` rule or requireApproval), or allowed (by a rule, an allowance or the default).
    /// The workspace is the current directory (paths are resolved there, symlinks followed, as
    /// a session resolves them). With --session and --store: in that session's current mode,
    /// with its allowances and its approved plan's files. Exit 0 allowed, 4 it would wait for a
    /// decision, 3 refused or not offered, 2 bad input (an unknown mode or tool, arguments
    /// that are not JSON or do not fit the tool's input schema).
    Explain(ExplainArgs),
    /// Print a modes TOML made from another tool's config, with what could not be carried over
    /// as comments at its top and on stderr: `roo` reads Roo Code's (or Kilo Code's)
    /// `.roomodes` (YAML or JSON), `opencode` an `opencode.json(c)` and `.opencode/agent/*.md`,
    /// `claude` a `.claude/settings.json` and `.claude/agents/*.md` (given a directory, each
    /// finds its files in it as the tool does). Exit 2 for a file that is malformed, too large
    /// or of another format; nothing is printed then.
    Import {
        /// The format of FILE.
        #[arg(value_enum)]
        format: ImportFormat,
        /// The file (or, for `opencode` and `claude`, the project directory) to import.
        file: PathBuf,
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
    /// and a longer value cut in its middle, its argsSha256 and the tools the session always
    /// allows), each entry with the allowances in force for its session (`allowances in force:`,
    /// `allowancesInForce` with --json), then the interrupted runs (a
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
    /// List the sessions of a session store, newest first: id, mode, when last saved (UTC),
    /// `pending` when a decision waits (else `-`), workspace and title (the first line of the
    /// first prompt, at most 120 characters), tab-separated and neutralized; with --json one
    /// object per line, everything whole. A stored record that cannot be read is not listed: it
    /// is a `warning:` line on stderr, and the exit status is 6.
    #[command(after_help = EXIT_STATUS_HELP)]
    Sessions {
        /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = parse_store)]
        store: String,
        /// Only the sessions of this workspace.
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's decisions in order (its audit log, kept in the store across restarts):
    /// when (the controller's clock, UTC), the decision id, the outcome, how (person, rule,
    /// allowance, hook, timeout, cancelled), who (`decidedBy`), what (the tool or `submit_plan`,
    /// the sha256 decided, the mode handed over to) and why (the reason or feedback),
    /// tab-separated and neutralized; with --json one record per line, whole, with `how`.
    #[command(after_help = EXIT_STATUS_HELP)]
    Log {
        /// The session id.
        session: String,
        /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = parse_store)]
        store: String,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print the report of a stored session's last run of an approved plan: the steps
    /// approved (done and not done, when the mode keeps a task list), the files written inside
    /// the plan's files, the writes outside them (approved, refused by the user, refused by
    /// `planScope = "enforce"`), the declared files never touched, and whether the plan file
    /// changed since approval. A session without one is refused (exit 5).
    #[command(after_help = EXIT_STATUS_HELP)]
    Report {
        /// The session id.
        session: String,
        /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = parse_store)]
        store: String,
        /// Print the report as one JSON object (the `plan_report` event's `report`).
        #[arg(long)]
        json: bool,
    },
    /// Decide a pending plan, a tool call waiting for approval, or answer a question of the
    /// model (`ask_user`), from a session store, in a fresh process, and carry the run on. With
    /// --approve, --reject, --answer or --answer-json and several calls waiting, name one with
    /// --decision (else exit 2, listing their ids); without them the prompt asks about each
    /// waiting call in turn, then, as `run` does, about what the run waits on next (a plan
    /// submitted after an answer or feedback); with them, that waits for the next `decide`.
    #[command(after_help = format!("{PROMPT_HELP}\n\n{EXIT_STATUS_HELP}"))]
    Decide(DecideArgs),
    /// Carry on an interrupted run from a session store, in a fresh process: a run whose process
    /// stopped after a save (killed during `decide`, say), once its lease has ended (`pending`
    /// lists it). Takes the lease first: of racing continuers one wins, the others are refused
    /// (exit 5), as is a run whose lease still runs. Tool calls are never run twice.
    #[command(after_help = format!("{PROMPT_HELP}\n\n{EXIT_STATUS_HELP}"))]
    Continue(ContinueArgs),
    /// Switch a stored session to another mode by hand, in a fresh process: leave planning
    /// without approving. A plan pending a decision, and tool calls waiting for approval, count
    /// as not approved, and the model is told so (and of the switch) when the session next
    /// runs. Of the allowances a decision gave (`allowances list --session`), those of scope
    /// `mode` end; those of scope `session` stop applying and apply again when the session
    /// returns to their mode; workspace ones stay. Switching to the mode the session is in
    /// changes nothing (exit 0); an unknown mode is refused (exit 2).
    #[command(after_help = EXIT_STATUS_HELP)]
    Switch(SwitchArgs),
    /// Property-test a mode config with the built-in tools (and the tools --tool stubs): report
    /// its errors and warnings as `check` does (exit 2 on errors), explore every reachable state
    /// of a session, walk every edge, and run the random state-machine test against the
    /// reference model, restarts included (an in-memory session store); print the coverage and a
    /// closing summary of what was checked and what was not. Exit 7 when the controller
    /// diverges, 1 when the check cannot be set up (an unknown tool: stub it with --tool).
    #[command(after_help = EXIT_STATUS_HELP)]
    Verify(VerifyArgs),
    /// Run an Agent Client Protocol agent on stdin and stdout (newline-delimited JSON-RPC 2.0),
    /// for editors such as Zed: sessions, modes, plan approvals and tool approvals in the
    /// editor. Each session works in the `cwd` the editor gives, with --config or that
    /// directory's own config/modes.toml. Ends when stdin closes (exit 0).
    Acp(AcpArgs),
    /// Serve an HTTP API over a session store, to decide away from the terminal (a browser, a
    /// phone, a chat relay): `GET /v1/pending`, `POST /v1/sessions/{id}/decisions/{decisionId}`,
    /// sessions, and their events as Server-Sent Events. Every route but `GET /healthz` takes
    /// `Authorization: Bearer TOKEN`: the token of AGENT_CONTROLLER_TOKEN, the named ones of
    /// AGENT_CONTROLLER_TOKENS (`alice=TOKEN1,bob=TOKEN2`, the name recorded as who decided), or
    /// one generated at start and shown once on stderr. The first stdout line is
    /// `listening on http://ADDR`. Runs until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// List or revoke the workspace allowances a session store keeps (`decide --always --scope
    /// workspace`, `a workspace` at the prompt): each lets a tool's calls run without asking in
    /// every session of the store in its workspace, under its config, in its mode. With
    /// --session, those of one session instead: what its decisions gave (scopes `mode` and
    /// `session`) and the workspace ones it applies.
    #[command(subcommand)]
    Allowances(AllowancesCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum AllowancesCommand {
    /// Print the workspace allowances of the store, oldest first, one a line: id, mode, tool and
    /// pattern, workspace, who gave it and when (`--json`: one JSON object a line). With
    /// --session: the allowances of that session, its own (scopes `mode` and `session`) first,
    /// each with its scope and whether it is in force (it applies in its mode only), and
    /// `inForce` with --json.
    List {
        /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = parse_store)]
        store: String,
        /// Only those of this workspace (resolved to its canonical path).
        #[arg(long, conflicts_with = "session")]
        workspace: Option<PathBuf>,
        /// The allowances of this session (its id, or a unique prefix of 8 or more characters).
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Revoke the workspace allowance with this id (as `list` shows it): no session opened
    /// afterwards applies it. With --session: revoke the allowance of that session with this id
    /// (`decision_N`, or a workspace one's `ws_...`, also revoked in the store), saved as any
    /// change to the session is: one that changed after it was read here is refused and nothing
    /// is revoked. An id the store or the session does not keep is refused (exit 5).
    Revoke {
        /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = parse_store)]
        store: String,
        /// The session whose allowance to revoke (its id, or a unique prefix of 8 or more
        /// characters).
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// With --session: the config file [default: config/modes.toml in the workspace the
        /// session recorded].
        #[arg(long, requires = "session")]
        config: Option<PathBuf>,
        /// With --session: the workspace the session recorded (default: taken from the record;
        /// another directory is refused, exit 2).
        #[arg(long, requires = "session")]
        workspace: Option<PathBuf>,
        /// The allowance's id (`ws_...`; with --session also `decision_N`).
        id: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    /// The config file [default: config/modes.toml in each session's workspace].
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Work only in this directory: a session whose `cwd` is another directory is refused.
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    /// Keep sessions in this store (a directory, `sqlite:FILE`, or
    /// `postgres://USER@HOST:PORT/DB`): the editor can load them again (`session/load`), and a
    /// plan pending when the editor closes stays pending (`pending`, `decide`), and the
    /// editor can list them (`session/list`).
    #[arg(long, value_parser = parse_store)]
    pub(crate) store: Option<String>,
    #[arg(long, default_value = "scripted", help = MODEL_HELP)]
    pub(crate) model: ModelSpec,
    /// The most sessions one `session/list` answer holds (with --store): the rest follow behind
    /// its `nextCursor`.
    #[arg(long, value_name = "N", default_value_t = agent_controller::acp::DEFAULT_LIST_PAGE_SIZE, value_parser = parse_page_size)]
    pub(crate) list_page_size: usize,
    /// The lease of a running run, in seconds (as for `run`).
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_lease)]
    pub(crate) lease: Duration,
    /// The most bytes one JSON-RPC message may have: a longer line is dropped and answered with
    /// a parse error (-32700).
    #[arg(long, value_name = "BYTES", default_value_t = agent_controller::acp::DEFAULT_MAX_MESSAGE_BYTES)]
    pub(crate) max_message_bytes: usize,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The config file [default: config/modes.toml in --workspace].
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, value_parser = parse_store)]
    pub(crate) store: String,
    /// The directory sessions work in, or beneath (a session started with `workspace` works in
    /// that directory under it) [default: .].
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    #[arg(long, default_value = "scripted", help = MODEL_HELP)]
    pub(crate) model: ModelSpec,
    /// The address to listen on; port 0 picks a free one. An address other than loopback needs
    /// a token from the environment (the token travels in clear: put a TLS proxy in front).
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub(crate) bind: std::net::SocketAddr,
    /// The lease of a running run, in seconds (as for `run`).
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_lease)]
    pub(crate) lease: Duration,
    /// POST a JSON notification to this URL when a decision starts waiting and when it is
    /// decided (repeatable), signed with HMAC-SHA256 over the body
    /// (`X-Agent-Controller-Signature: sha256=HEX`); the key comes from
    /// AGENT_CONTROLLER_WEBHOOK_SECRET, which must be set.
    #[arg(long = "notify", value_name = "URL", value_parser = parse_http_url)]
    pub(crate) notify: Vec<String>,
    /// The address people reach the server at (behind a proxy, say), the base of the links the
    /// notifications carry [default: the bound address].
    #[arg(long, value_name = "URL", value_parser = parse_http_url)]
    pub(crate) public_url: Option<String>,
}

/// What `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ImportFormat {
    /// Roo Code's or Kilo Code's `.roomodes` (YAML or JSON).
    Roo,
    /// OpenCode's `opencode.json` / `opencode.jsonc` agents and `.opencode/agent/*.md` files.
    Opencode,
    /// Claude Code's `.claude/settings.json` permissions and `.claude/agents/*.md` subagents.
    Claude,
}

#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// The mode the call is made in (with --session: the session's mode, which it must name if
    /// given).
    #[arg(long, required_unless_present = "session")]
    pub(crate) mode: Option<String>,
    /// The tool called.
    pub(crate) tool: String,
    /// Its arguments, as a JSON object.
    #[arg(value_name = "ARGS_JSON", default_value = "{}")]
    pub(crate) args: String,
    /// The config file [default: config/modes.toml; with --session, the file the session ran
    /// under, where it still is].
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Print the explanation as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// A stored session whose allowances and approved plan weigh in (its id, or a unique prefix
    /// of 8 or more characters).
    #[arg(long, requires = "store")]
    pub(crate) session: Option<String>,
    /// The store of --session: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, requires = "session", value_parser = parse_store)]
    pub(crate) store: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The config file.
    #[arg(default_value = DEFAULT_CONFIG)]
    pub(crate) config: PathBuf,
    /// Random operation sequences to run (default: `PROPTEST_CASES`, else 256).
    #[arg(long)]
    pub(crate) cases: Option<u32>,
    /// The seed of the random test (every run prints its seed: give it to replay a failure).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Keep failing cases in this file, replayed first next time (default:
    /// proptest-regressions/agent-controller-check/CONFIG.txt, CONFIG the config's file name).
    #[arg(long)]
    pub(crate) regressions: Option<PathBuf>,
    /// Stub a tool of your host that the config names (repeatable): it takes any arguments and
    /// returns a fixed result. It writes (a planning mode offers it only where listed) unless
    /// marked `:read-only`.
    #[arg(long = "tool", value_name = "NAME[:read-only]", value_parser = parse_stub)]
    pub(crate) tools: Vec<StubSpec>,
}

/// A tool `verify --tool` stubs: its name, and whether it is declared read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StubSpec {
    pub(crate) name: String,
    pub(crate) read_only: bool,
}

/// `--tool NAME` or `--tool NAME:read-only`.
fn parse_stub(value: &str) -> Result<StubSpec, String> {
    let (name, read_only) = match value.rsplit_once(':') {
        Some((name, "read-only")) => (name, true),
        Some((_, access)) => {
            return Err(format!(
                "`{access}` is not an access: give NAME (a tool that writes) or NAME:read-only"
            ));
        }
        None => (value, false),
    };
    if name.is_empty() || name.chars().any(char::is_whitespace) {
        return Err("give the tool's name: NAME or NAME:read-only".to_owned());
    }
    Ok(StubSpec {
        name: name.to_owned(),
        read_only,
    })
}

#[derive(Debug, Args)]
// The `--allow-*` patterns: at most one of them narrows an allowance.
#[command(group(clap::ArgGroup::new("allow_pattern").args(["allow_path", "allow_glob", "allow_regex"])))]
pub(crate) struct DecideArgs {
    /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, value_parser = parse_store)]
    pub(crate) store: String,
    /// The session whose pending plan or tool call to decide.
    pub(crate) session: String,
    /// Decide only this decision (`decision_N`, as `pending` and the `tool_suspended` event show
    /// it): the pending plan, or one of the tool calls waiting for approval; an id that is not
    /// pending is refused (exit 5) and nothing changes.
    #[arg(long, value_name = "ID")]
    pub(crate) decision: Option<String>,
    /// With --approve of a tool call that waits for approval: also allow its tool until the
    /// mode changes (a manual switch or an approved plan). It approves this call only: the other
    /// calls waiting in the reply are each shown and asked about, and the tool's calls in later
    /// replies run without waiting. A plan cannot be always allowed: `--always` on a plan is
    /// refused (exit 2) and nothing changes.
    #[arg(long)]
    pub(crate) always: bool,
    /// With --always: how long the allowance lasts. `mode` (the default): until the mode
    /// changes; `session`: for the rest of the session, while it is in this mode; `workspace`:
    /// kept in the store for every session in this workspace under this config, in this mode
    /// (`allowances list` shows them).
    #[arg(long, requires = "always", value_parser = parse_scope)]
    pub(crate) scope: Option<AllowanceScope>,
    /// With --always: allow only the calls whose path argument (`path`, or the one --allow-arg
    /// names), as the workspace jail resolves it, fits this glob (`src/**`), as an `allow`
    /// rule's `path` matches.
    #[arg(long, value_name = "GLOB", requires = "always")]
    pub(crate) allow_path: Option<String>,
    /// With --always and --allow-glob, --allow-regex or --allow-path: the argument the pattern
    /// reads, one the tool's input schema declares.
    #[arg(
        long,
        value_name = "NAME",
        requires = "always",
        requires = "allow_pattern"
    )]
    pub(crate) allow_arg: Option<String>,
    /// With --always and --allow-arg: allow only the calls whose argument, its canonical value
    /// whole, fits this glob (`git *`), as an `allow` rule's `glob` matches (never a value of
    /// several lines, an array or an object). It reads the text as sent: for an argument that
    /// names a file, use --allow-arg NAME --allow-path GLOB, which follows it where it leads (a
    /// glob on `path` is refused for that reason).
    #[arg(long, value_name = "GLOB", requires = "allow_arg")]
    pub(crate) allow_glob: Option<String>,
    /// With --always and --allow-arg: allow only the calls whose argument, its canonical value
    /// whole, matches this regex, as an `allow` rule's `regex` matches.
    #[arg(long, value_name = "REGEX", requires = "allow_arg")]
    pub(crate) allow_regex: Option<String>,
    /// Act on the session under this config even where it lets the modes do more than the
    /// config the session ran under (a mode that offers a tool, runs one without asking, drops
    /// a rule, hands plans over elsewhere); without it that is refused (exit 5), naming what
    /// would do more. A config that only narrows them needs no flag (a note says what changed).
    #[arg(long)]
    pub(crate) allow_config_change: bool,
    #[command(flatten)]
    pub(crate) common: SessionArgs,
}

impl DecideArgs {
    /// The narrowing the `--allow-*` flags give, as the library's pattern; `None` without them.
    pub(crate) fn allow_pattern(&self) -> Option<AllowancePattern> {
        let pattern = AllowancePattern {
            arg: self.allow_arg.clone(),
            path: self.allow_path.clone(),
            glob: self.allow_glob.clone(),
            regex: self.allow_regex.clone(),
        };
        (pattern != AllowancePattern::default()).then_some(pattern)
    }
}

/// `--scope`: `mode`, `session` or `workspace`.
fn parse_scope(text: &str) -> Result<AllowanceScope, String> {
    text.parse()
        .map_err(|e: agent_controller::error::UnknownName| e.to_string())
}

#[derive(Debug, Args)]
pub(crate) struct SwitchArgs {
    /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, value_parser = parse_store)]
    pub(crate) store: String,
    /// The session to switch (its id, or a unique prefix of 8 or more characters).
    pub(crate) session: String,
    /// The mode to switch to, by its id.
    pub(crate) mode: String,
    /// The config file [default: the file the session ran under, where it still is; else
    /// config/modes.toml in the workspace the session recorded].
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// The workspace the session recorded (default: taken from the record; another directory
    /// is refused, exit 2).
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    /// Print one JSON event per line on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Act on the session under this config even where it lets the modes do more than the
    /// config the session ran under (a mode that offers a tool, runs one without asking, drops
    /// a rule, hands plans over elsewhere); without it that is refused (exit 5), naming what
    /// would do more. A config that only narrows them needs no flag (a note says what changed).
    #[arg(long)]
    pub(crate) allow_config_change: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ContinueArgs {
    /// The store: a directory, `sqlite:FILE`, or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, value_parser = parse_store)]
    pub(crate) store: String,
    /// The session whose interrupted run to carry on.
    pub(crate) session: String,
    /// Act on the session under this config even where it lets the modes do more than the
    /// config the session ran under (a mode that offers a tool, runs one without asking, drops
    /// a rule, hands plans over elsewhere); without it that is refused (exit 5), naming what
    /// would do more. A config that only narrows them needs no flag (a note says what changed).
    #[arg(long)]
    pub(crate) allow_config_change: bool,
    #[command(flatten)]
    pub(crate) common: SessionArgs,
}

/// Options `run`, `decide` and `continue` share: where the config and workspace are, how plans
/// are decided, how events are printed, which model runs, and the lease of a running run.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// The config file [default: config/modes.toml in the workspace; for decide and continue,
    /// the file the session ran under, where it still is].
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// The workspace the tools work in [`run`: default `.`]. `decide` and `continue` act in the
    /// workspace the session recorded when it started: without this flag they take it from the
    /// record, and this flag naming another directory is refused (exit 2).
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) decision: DecisionArgs,
    /// Print one JSON event per line on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    #[arg(long, help = format!("{MODEL_HELP} {SESSION_MODEL_HELP}"))]
    pub(crate) model: Option<ModelSpec>,
    /// The lease of a run this process carries on, in seconds (renewed while it works): if the
    /// process stops, the run is interrupted once the lease ends, and `continue` carries it on.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_lease)]
    pub(crate) lease: Duration,
}

/// `--lease`: a positive number of seconds (fractions allowed).
pub(crate) fn parse_lease(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err("a lease is a number of seconds above 0, at most 86400".to_owned()),
    }
}

/// An `http://` or `https://` URL with a host (`--notify`, `--public-url`).
pub(crate) fn parse_http_url(text: &str) -> Result<String, String> {
    let usage = "give an http:// or https:// URL with a host (https://hooks.example/approvals)";
    let url = reqwest::Url::parse(text.trim()).map_err(|e| format!("{e}: {usage}"))?;
    match (url.scheme(), url.host_str()) {
        ("http" | "https", Some(host)) if !host.is_empty() => Ok(url.to_string()),
        _ => Err(usage.to_owned()),
    }
}

/// A page size: a whole number from 1 to 10000.
pub(crate) fn parse_page_size(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=10_000).contains(&n) => Ok(n),
        _ => Err("a page size is a whole number from 1 to 10000".to_owned()),
    }
}

/// The decision flags of `run` and `decide`: a verdict flag takes no value, so a word after it is
/// never taken for feedback (`run --reject "Add dark mode"` plans "Add dark mode").
#[derive(Debug, Args)]
pub(crate) struct DecisionArgs {
    /// Approve the plan without asking (with `decide`: the plan or the tool call it decides; with
    /// `run` and `continue`: every plan, never a tool call, which is asked about at the prompt
    /// or, with a store and no answer, left pending, exit 4).
    #[arg(long, group = "verdict")]
    pub(crate) approve: bool,
    /// Reject the plan without asking (which decision as for --approve).
    #[arg(long, group = "verdict")]
    pub(crate) reject: bool,
    /// Answer the question (or the suspension of a tool) `decide` names with this text: for a
    /// question with options, an option's label or its number as the prompt shows it (1 for
    /// the first; when a label is itself a number, a number is that label); repeat it for a
    /// multi-select question. The answer must fit what the question takes, or it is refused
    /// (exit 2, listing the labels) and nothing changes. A label with a character no one can
    /// type (`pending` shows it as `\u{200b}`) goes in --answer-json.
    #[arg(long, value_name = "TEXT", group = "verdict")]
    pub(crate) answer: Vec<String>,
    /// Answer with this JSON value (the bare answer: `"staging"`, `["a","b"]`,
    /// `{"confirm": true}`), for a tool of your own whose answer is not text.
    #[arg(long, value_name = "JSON", group = "verdict")]
    pub(crate) answer_json: Option<String>,
    /// A note for the model with --approve or --reject (a rejection with feedback makes the model
    /// revise and submit again; with the approval of a tool call, the model gets it after the
    /// tool's result).
    #[arg(long, value_name = "TEXT")]
    pub(crate) feedback: Option<String>,
    /// Decide only the plan with this SHA-256, the tool call with this argsSha256, or the
    /// question with this payloadSha256 (64 hex digits, as the `tool_suspended` event shows it;
    /// for `decide`, also a unique prefix of at least 8, as `pending` shows it); any other is
    /// refused (exit 5) and nothing changes.
    #[arg(long, value_name = "HASH", value_parser = parse_sha256)]
    pub(crate) sha256: Option<String>,
    /// Who decides (also `--as NAME`), recorded as `decidedBy` in the session record and the
    /// events (default: the OS user from $USER or $LOGNAME, else `unknown`); also for answers
    /// typed at the prompt. Self-declared: under a quorum (`approvers = N`) each approval
    /// counts once per name.
    #[arg(long, visible_alias = "as", value_name = "NAME")]
    pub(crate) by: Option<String>,
    /// With --approve: hand the plan over to this mode instead of the first target. It must be
    /// one of the targets the planning mode's `transitionsTo` lists (as `pending` and the
    /// `tool_suspended` event show them); any other is refused (exit 5) and nothing changes.
    #[arg(long, value_name = "MODE")]
    pub(crate) to: Option<String>,
    /// With --approve: approve the plan as edited in this file (a regular file, at most 1 MiB,
    /// UTF-8, not blank): the next mode receives its text; --sha256 still names the plan shown.
    #[arg(long, value_name = "FILE")]
    pub(crate) plan_file: Option<PathBuf>,
    /// With --reject: a comment on a line of the plan shown, `LINE:TEXT` (`4:"staging first"`;
    /// lines from 1, the `# title` line first, as `c` numbers them at the prompt); repeat it for
    /// more. The model receives each with the line it quotes. A line outside the plan or a
    /// blank text is refused (exit 2) and nothing changes.
    #[arg(long = "comment", value_name = "LINE:TEXT", value_parser = parse_comment)]
    pub(crate) comments: Vec<PlanComment>,
    /// The model the next mode runs with once a plan is approved (by --approve or at the
    /// prompt): a model spec as --model takes it (`openai/gpt-4o-mini`, `anthropic/NAME`,
    /// `scripted`). It runs the mode the plan hands over to until the session's next change of
    /// mode, and the audit record keeps it (`model`). A spec this build cannot open is refused
    /// (exit 2) and nothing changes.
    #[arg(long = "model-for-next", value_name = "ID", value_parser = parse_model_for_next)]
    pub(crate) model_for_next: Option<String>,
    /// With --approve: approve only these steps of the plan, by the numbers the plan gives
    /// them, as numbers and ranges (`1-3,5`): the next mode gets the plan with the other steps
    /// marked as not approved, and the task list holds only these. A step the plan does not
    /// have, a step named twice or a list that does not read is refused (exit 2) and nothing
    /// changes.
    #[arg(long, value_name = "LIST", value_parser = parse_steps)]
    pub(crate) steps: Option<StepList>,
    /// `decide --always` (a flag of `decide` alone, copied here: [`DecideArgs::always`]).
    #[arg(skip)]
    pub(crate) always: bool,
    /// `decide --scope` ([`DecideArgs::scope`]).
    #[arg(skip)]
    pub(crate) scope: Option<AllowanceScope>,
    /// The pattern `decide --allow-path`, `--allow-arg`, `--allow-glob` and `--allow-regex`
    /// give ([`DecideArgs::allow_pattern`]).
    #[arg(skip)]
    pub(crate) allow: Option<AllowancePattern>,
    /// The text of --plan-file, read and checked once before anything is decided.
    #[arg(skip)]
    pub(crate) edited: Option<String>,
}

/// `--store`: a spec [`check_spec`] accepts, so one that would lose the session is a usage
/// error (exit 2) before anything runs.
pub(crate) fn parse_store(text: &str) -> Result<String, String> {
    match check_spec(text) {
        Ok(()) => Ok(text.to_owned()),
        Err(StoreError::InvalidSpec { reason, .. }) => Err(reason),
        Err(other) => Err(other.to_string()),
    }
}

/// `--comment LINE:TEXT`: a line number and a text that is not blank (whether the line is one
/// of the plan's is the library's check, against the plan that waits).
pub(crate) fn parse_comment(text: &str) -> Result<PlanComment, String> {
    let usage = "a comment is LINE:TEXT, a line number of the plan and what to say about it (4:\"staging first\")";
    let (line, said) = text.split_once(':').ok_or(usage)?;
    let line = line.trim().parse::<u64>().map_err(|_| usage.to_owned())?;
    if said.trim().is_empty() {
        return Err(format!("the comment on line {line} has no text: {usage}"));
    }
    Ok(PlanComment {
        line,
        text: said.trim().to_owned(),
    })
}

/// `--steps LIST`: step numbers and ranges (`1-3,5`), as [`Decision::parse_steps`] reads them
/// (whether the plan has those steps is the library's check, against the plan that waits).
pub(crate) fn parse_steps(text: &str) -> Result<StepList, String> {
    agent_controller::Decision::parse_steps(text)
        .map(StepList)
        .map_err(|e| e.to_string())
}

/// The step numbers `--steps` names, in one value (clap reads a bare `Vec` as many).
#[derive(Debug, Clone)]
pub(crate) struct StepList(pub(crate) Vec<u64>);

/// `--model-for-next ID`: a model spec this build can open (as an approval would open it), so
/// a bad one is a usage error (exit 2) before anything runs, not a failed approval after the
/// whole planning run.
pub(crate) fn parse_model_for_next(text: &str) -> Result<String, String> {
    use agent_controller::model::ModelChooser;
    agent_controller::model::SpecChooser
        .build(text)
        .map(|_| text.to_owned())
}

pub(crate) fn parse_sha256(text: &str) -> Result<String, String> {
    let hash = text.trim().to_ascii_lowercase();
    let digits = agent_controller::store::MIN_PREFIX_CHARS..=64;
    if digits.contains(&hash.len()) && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hash)
    } else {
        Err(format!(
            "a SHA-256 is 64 hex digits, or a prefix of at least {} of them (as `pending` shows)",
            agent_controller::store::MIN_PREFIX_CHARS
        ))
    }
}

pub(crate) fn parse_format(text: &str) -> Result<DiagramFormat, String> {
    text.parse()
        .map_err(|_| format!("unknown format `{text}`: use mermaid or dot"))
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) common: SessionArgs,
    /// The mode to start in (default: the config's default mode).
    #[arg(long)]
    pub(crate) mode: Option<String>,
    /// A plan file to submit as is (copied into the plans directory when outside it).
    #[arg(long)]
    pub(crate) plan: Option<PathBuf>,
    /// Persist the session in this store (a directory, `sqlite:FILE`, or
    /// `postgres://USER@HOST:PORT/DB`; throw-away databases such as `sqlite::memory:` are
    /// refused).
    #[arg(long, value_parser = parse_store)]
    pub(crate) store: Option<String>,
    /// With --store: stop once a plan is suspended and print the session and run ids.
    #[arg(long, requires = "store")]
    pub(crate) detach: bool,
    /// The user's message.
    #[arg(default_value = "Plan the next change")]
    pub(crate) prompt: String,
}
