//! What the standard streams are connected to, and the ANSI codes used when colour is on.

use std::io::IsTerminal;

/// Dim (faint) text.
pub const DIM: &str = "\x1b[2m";
/// Red text.
pub const RED: &str = "\x1b[31m";
/// Bold red text.
pub const BOLD_RED: &str = "\x1b[1;31m";
/// Back to normal text.
pub const RESET: &str = "\x1b[0m";

/// Whether `NO_COLOR` asks for no colour (set to a non-empty value, per <https://no-color.org>).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Which standard streams are terminals, and whether colour is allowed at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal {
    /// stdin is a terminal (show a prompt).
    pub stdin: bool,
    /// stdout is a terminal (show reasoning; colour it).
    pub stdout: bool,
    /// stderr is a terminal (colour tool and error lines).
    pub stderr: bool,
    /// `NO_COLOR` is set.
    pub no_color: bool,
}

impl Terminal {
    /// Looks at the process's streams and environment.
    pub fn detect() -> Self {
        Self {
            stdin: std::io::stdin().is_terminal(),
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
            no_color: no_color(),
        }
    }

    /// Whether to write ANSI codes to stdout.
    pub fn stdout_color(&self) -> bool {
        self.stdout && !self.no_color
    }

    /// Whether to write ANSI codes to stderr.
    pub fn stderr_color(&self) -> bool {
        self.stderr && !self.no_color
    }
}
