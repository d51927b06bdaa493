//! The crate-wide [`Error`]: one variant per area, each wrapping that area's typed error, with a
//! `From` for each so `?` works across areas in a function returning [`Result`].
//!
//! ```
//! use std::sync::Arc;
//! use agent_controller::{AgentController, FileStore, SessionOptions};
//! use agent_controller::model::scripted::ScriptedModel;
//!
//! // Every area's error converts: config, store, controller, session, run.
//! async fn host(dir: &std::path::Path) -> agent_controller::Result<()> {
//!     let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"", "modes.toml")?;
//!     let store = FileStore::open(dir.join("sessions"))?;
//!     let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
//!         .workspace(dir)
//!         .store(Arc::new(store))
//!         .build()?;
//!     let mut session = controller.start_session(SessionOptions::new()).await?;
//!     session.send_message("hello").await?;
//!     let restored = controller.restore_session(session.id(), SessionOptions::new()).await?;
//!     assert_eq!(restored.mode().id(), "build");
//!     Ok(())
//! }
//! # let dir = std::env::temp_dir().join(format!("ac-error-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(host(&dir)).unwrap();
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::config::ConfigError;
use crate::model::ModelError;
use crate::session::SessionError;
use crate::store::StoreError;
use crate::tool::ToolError;
use crate::tool::submit_plan::PlanError;

/// Any error of this crate. Each variant wraps one area's error, which stays reachable through
/// `match` and as [`std::error::Error::source`] (`Display` is the inner error's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A config could not be loaded or does not fit the controller's tools.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A session operation was refused.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A tool registry could not be built.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A session store failed (opening it, loading or saving).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A model call failed, or a model could not be set up.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A plan file could not be read or submitted.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use crate::names::UnknownName;
