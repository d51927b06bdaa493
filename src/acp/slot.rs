//! One ACP session: the library's [`Session`] behind a lock, and where its prompt turn stands,
//! so `session/cancel` and a manual switch reach the turn wherever it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::acp::SessionServers;
use crate::acp::update::Updates;
use crate::mode::ModeGraph;
use crate::session::{CancelHandle, Session};

/// Where the session's prompt turn stands.
#[derive(Debug, Default)]
enum Phase {
    /// No prompt is running.
    #[default]
    Idle,
    /// A prompt runs: the model or a tool works, or a decision is being applied.
    Running,
    /// A permission request is open; cancelling the token stops waiting for its answer.
    Asking(CancellationToken),
}

#[derive(Debug, Default)]
struct Turn {
    phase: Phase,
    /// `session/cancel` arrived during this turn.
    cancel_requested: bool,
}

/// One session of the connection.
pub(crate) struct Slot {
    pub(crate) session: tokio::sync::Mutex<Session>,
    pub(crate) graph: ModeGraph,
    pub(crate) has_store: bool,
    pub(crate) updates: Updates,
    cancel: CancelHandle,
    turn: Mutex<Turn>,
    /// The client's MCP servers for this session, stopped when the connection ends.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    servers: Mutex<SessionServers>,
}

impl Slot {
    pub(crate) fn new(
        session: Session,
        graph: ModeGraph,
        has_store: bool,
        updates: Updates,
        servers: SessionServers,
    ) -> Self {
        Self {
            servers: Mutex::new(servers),
            cancel: session.cancel_handle(),
            session: tokio::sync::Mutex::new(session),
            graph,
            has_store,
            updates,
            turn: Mutex::new(Turn::default()),
        }
    }

    /// Stops the client's MCP servers of this session (the connection ends).
    #[cfg(feature = "mcp")]
    pub(crate) async fn stop_servers(&self) {
        let servers = self
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(servers) = servers {
            servers.shutdown().await;
        }
    }

    fn turn(&self) -> MutexGuard<'_, Turn> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a prompt turn; `false` when one is running already (prompts to one session are
    /// taken one at a time).
    pub(crate) fn begin_turn(&self) -> bool {
        let mut turn = self.turn();
        if !matches!(turn.phase, Phase::Idle) {
            return false;
        }
        *turn = Turn {
            phase: Phase::Running,
            cancel_requested: false,
        };
        true
    }

    /// Ends the turn; a cancel kept for a run that never came is withdrawn, so it cannot end
    /// the next turn's first run.
    pub(crate) fn end_turn(&self) {
        let mut turn = self.turn();
        *turn = Turn::default();
        self.cancel.withdraw();
    }

    /// `session/cancel`: stops the run in progress through its cancel handle (or the turn's
    /// next run, when none is in progress), or stops waiting for an open permission request.
    /// Nothing when no prompt runs.
    pub(crate) fn cancel(&self) {
        let mut turn = self.turn();
        match &turn.phase {
            Phase::Idle => return,
            Phase::Running => {
                self.cancel.cancel();
            }
            Phase::Asking(token) => token.cancel(),
        }
        turn.cancel_requested = true;
    }

    /// Whether `session/cancel` arrived during this turn.
    pub(crate) fn cancel_requested(&self) -> bool {
        self.turn().cancel_requested
    }

    /// A permission request is about to be sent: the token stops waiting for its answer
    /// (cancelled at once when the turn was cancelled already).
    pub(crate) fn asking(&self) -> CancellationToken {
        let token = CancellationToken::new();
        let mut turn = self.turn();
        if turn.cancel_requested {
            token.cancel();
        }
        turn.phase = Phase::Asking(token.clone());
        token
    }

    /// The permission request was answered (or given up on): the turn runs again.
    pub(crate) fn answered(&self) {
        let mut turn = self.turn();
        if !matches!(turn.phase, Phase::Idle) {
            turn.phase = Phase::Running;
        }
    }

    /// A manual switch is coming: a run in progress stops (as `session/cancel` stops it, so
    /// the prompt ends `cancelled`) before the switch takes the session. An open permission
    /// request is left to [`Slot::stop_asking`], once the switch settled what it asks about.
    pub(crate) fn stop_running(&self) {
        let mut turn = self.turn();
        if matches!(turn.phase, Phase::Running) {
            self.cancel.cancel();
            turn.cancel_requested = true;
        }
    }

    /// A manual switch settled what the open permission request asks about: stop waiting.
    pub(crate) fn stop_asking(&self) {
        if let Phase::Asking(token) = &self.turn().phase {
            token.cancel();
        }
    }
}
