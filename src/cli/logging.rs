//! `--log-level`: the `tracing` subscriber on stderr.

use crate::cli::args::LogLevel;

/// Installs a `tracing` subscriber writing to stderr (stdout carries events and results).
pub(crate) fn init_logging(level: LogLevel) {
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
