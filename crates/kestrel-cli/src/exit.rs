//! Exit codes of the `kestrel` binary.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success |
//! | 1 | the run failed (an `error` event: provider error, network error…) or output failed |
//! | 2 | bad usage or configuration: no model configured, unknown model, missing API key |
//! | 130 | interrupted with Ctrl-C |

use std::process::ExitCode;

/// The run failed.
pub const FAILURE: u8 = 1;
/// Bad usage or configuration (the same code clap uses for invalid arguments).
pub const USAGE: u8 = 2;
/// Interrupted by Ctrl-C (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = 130;

/// Prints `error: <message>` as one line on stderr and returns `code`.
pub fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}
