//! The crate-wide [`Error`]: one variant per area, each wrapping that area's typed error.

use crate::config::ConfigError;
use crate::session::SessionError;
use crate::tool::ToolError;

/// Any error of this crate.
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
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
