//! `verify`: property-tests a mode config with the built-in tools.

use crate::cli::args::VerifyArgs;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::tools;

/// `verify`: the testing kit's check with the built-in tools; a divergence exits 1, an invalid
/// config 2.
pub(crate) fn verify(args: VerifyArgs) -> Outcome {
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
    let result = check.run(|setup| setup.builder().tools(tools()).build());
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
