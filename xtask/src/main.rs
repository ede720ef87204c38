//! `cargo xtask`: the workspace's two commands, with their prerequisites checked first.
//!
//! - `cargo xtask dev [ARGS...]` runs the main job, `cargo run --release -p kestrel-cli -- dev
//!   ARGS...` (the server and the Studio with demo agents).
//! - `cargo xtask test [ARGS...]` runs all tests: `cargo nextest run --workspace ARGS...`, then,
//!   if that passed, `cargo test --workspace --doc`.
//! - `cargo xtask prereqs` only checks (and installs) the prerequisites.
//!
//! Before running, each makes sure of what the build needs beyond Rust ([`prereqs`]): cmake,
//! clang and libclang for the embedded model's llama.cpp build, and for `test` cargo-nextest.
//! What is missing is installed where the machine allows it (apt-get on Debian/Ubuntu, as root
//! or through sudo; `cargo install`), announced in one line; otherwise xtask stops with one
//! line naming the command to run. When everything is there it prints nothing of its own.
//!
//! The alias lives in `.cargo/config.toml`. The crate has no dependencies beyond std, so it
//! compiles in a second or two on a fresh machine, before anything else is known to build.

mod prereqs;

use std::env;
use std::ffi::{OsStr, OsString};
use std::process::{Command, ExitCode, ExitStatus};

/// The help text.
const USAGE: &str = "usage: cargo xtask <task> [ARGS...]

tasks:
  dev [ARGS...]    the main job: cargo run --release -p kestrel-cli -- dev ARGS...
  test [ARGS...]   all tests: cargo nextest run --workspace ARGS..., then cargo test --workspace --doc
  prereqs          check the prerequisites (cmake, clang, libclang, cargo-nextest), installing
                   what is missing where possible

Each task first installs what is missing (apt-get on Debian/Ubuntu, as root or through sudo;
cargo install cargo-nextest --locked), or stops with one line naming the command to run.";

/// A parsed command line.
#[derive(Debug, PartialEq, Eq)]
enum Task {
    /// `dev`: the main job, with the arguments for `kestrel dev`.
    Dev(Vec<OsString>),
    /// `test`: all tests, with extra arguments for nextest.
    Test(Vec<OsString>),
    /// `prereqs`: only the prerequisite check.
    Prereqs,
    /// `help`, `-h`, `--help`.
    Help,
}

/// Parses xtask's arguments (without the program name); the error is the line to print.
fn parse(args: Vec<OsString>) -> Result<Task, String> {
    let mut args = args.into_iter();
    let Some(task) = args.next() else {
        return Err("error: no task given".to_owned());
    };
    let rest: Vec<OsString> = args.collect();
    match task.to_str() {
        Some("dev") => Ok(Task::Dev(rest)),
        Some("test") => Ok(Task::Test(rest)),
        Some("prereqs") if rest.is_empty() => Ok(Task::Prereqs),
        Some("prereqs") => Err("error: `prereqs` takes no arguments".to_owned()),
        Some("help" | "-h" | "--help") => Ok(Task::Help),
        _ => Err(format!("error: unknown task `{}`", task.to_string_lossy())),
    }
}

/// Cargo's arguments for the main job.
fn dev_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut all: Vec<OsString> = ["run", "--release", "-p", "kestrel-cli", "--", "dev"]
        .into_iter()
        .map(OsString::from)
        .collect();
    all.extend(args);
    all
}

/// Cargo's arguments for the nextest run of all tests.
fn nextest_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut all: Vec<OsString> = ["nextest", "run", "--workspace"]
        .into_iter()
        .map(OsString::from)
        .collect();
    all.extend(args);
    all
}

/// Cargo's arguments for the doc tests (nextest does not run them).
const DOC_ARGS: [&str; 3] = ["test", "--workspace", "--doc"];

/// The cargo that runs xtask (`CARGO`, set by `cargo run`), or `cargo` from `PATH`.
fn cargo_program() -> OsString {
    env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"))
}

/// The exit status byte for a child's exit code or, on Unix, the signal that ended it
/// (128 + signal, as shells report it); 1 when it does not fit.
fn exit_byte(code: Option<i32>, signal: Option<i32>) -> u8 {
    match (code, signal) {
        (Some(code), _) => u8::try_from(code).ok(),
        (None, Some(signal)) => signal.checked_add(128).and_then(|n| u8::try_from(n).ok()),
        (None, None) => None,
    }
    .unwrap_or(1)
}

/// xtask's exit code for a child's status: the same code (or 128 + signal on Unix).
fn exit_code(status: ExitStatus) -> ExitCode {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    ExitCode::from(exit_byte(status.code(), signal))
}

/// Runs cargo with `args`, output to the terminal; the error is the line to stop with.
fn run_cargo<S: AsRef<OsStr>>(cargo: &OsStr, args: &[S]) -> Result<ExitStatus, String> {
    Command::new(cargo)
        .args(args)
        .status()
        .map_err(|err| format!("error: could not run {}: {err}", cargo.to_string_lossy()))
}

/// Runs the main job. On Unix xtask becomes cargo (`exec`), so Ctrl-C and the exit status
/// reach `kestrel dev` exactly as under a plain `cargo run`.
fn dev(cargo: &OsStr, args: Vec<OsString>) -> Result<ExitCode, String> {
    let args = dev_args(args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let err = Command::new(cargo).args(&args).exec();
        Err(format!(
            "error: could not run {}: {err}",
            cargo.to_string_lossy()
        ))
    }
    #[cfg(not(unix))]
    {
        run_cargo(cargo, &args).map(exit_code)
    }
}

/// Runs all tests: nextest, then (if it passed) the doc tests; the exit code is the first
/// failure's.
fn test(cargo: &OsStr, args: Vec<OsString>) -> Result<ExitCode, String> {
    let nextest = run_cargo(cargo, &nextest_args(args))?;
    if !nextest.success() {
        return Ok(exit_code(nextest));
    }
    run_cargo(cargo, &DOC_ARGS).map(exit_code)
}

/// Runs `task`; the error is the one line to stop with.
fn run(task: Task) -> Result<ExitCode, String> {
    let cargo = cargo_program();
    match task {
        Task::Help => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Task::Prereqs => {
            prereqs::ensure_native()?;
            prereqs::ensure_nextest(&cargo)?;
            Ok(ExitCode::SUCCESS)
        }
        Task::Dev(args) => {
            prereqs::ensure_native()?;
            dev(&cargo, args)
        }
        Task::Test(args) => {
            prereqs::ensure_native()?;
            prereqs::ensure_nextest(&cargo)?;
            test(&cargo, args)
        }
    }
}

/// Parses the command line and runs the task; 2 for a bad command line, 1 for a prerequisite
/// that could not be met, otherwise the exit code of what ran.
fn main() -> ExitCode {
    let task = match parse(env::args_os().skip(1).collect()) {
        Ok(task) => task,
        Err(line) => {
            eprintln!("{line}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(task) {
        Ok(code) => code,
        Err(line) => {
            eprintln!("{line}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// Owned arguments from string literals.
    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn parses_the_tasks() {
        assert_eq!(
            parse(os(&["dev", "--port", "8080"])),
            Ok(Task::Dev(os(&["--port", "8080"])))
        );
        assert_eq!(parse(os(&["dev"])), Ok(Task::Dev(vec![])));
        assert_eq!(
            parse(os(&["test", "local_model"])),
            Ok(Task::Test(os(&["local_model"])))
        );
        assert_eq!(parse(os(&["prereqs"])), Ok(Task::Prereqs));
        for help in ["help", "-h", "--help"] {
            assert_eq!(parse(os(&[help])), Ok(Task::Help));
        }
        assert!(parse(vec![]).is_err());
        assert!(parse(os(&["prereqs", "x"])).is_err());
        assert_eq!(
            parse(os(&["build"])),
            Err("error: unknown task `build`".to_owned())
        );
    }

    #[test]
    fn dev_runs_kestrel_dev_with_the_arguments() {
        assert_eq!(
            dev_args(os(&["--port", "0"])),
            os(&[
                "run",
                "--release",
                "-p",
                "kestrel-cli",
                "--",
                "dev",
                "--port",
                "0"
            ])
        );
    }

    #[test]
    fn test_runs_nextest_on_the_workspace_with_the_arguments() {
        assert_eq!(
            nextest_args(os(&["--no-fail-fast"])),
            os(&["nextest", "run", "--workspace", "--no-fail-fast"])
        );
        assert_eq!(DOC_ARGS, ["test", "--workspace", "--doc"]);
    }

    #[test]
    fn exit_codes_are_forwarded() {
        assert_eq!(exit_byte(Some(0), None), 0);
        assert_eq!(exit_byte(Some(1), None), 1);
        assert_eq!(exit_byte(Some(100), None), 100);
        // Out of range never turns into success.
        assert_eq!(exit_byte(Some(256), None), 1);
        assert_eq!(exit_byte(Some(-1), None), 1);
        // Killed by SIGINT / SIGKILL.
        assert_eq!(exit_byte(None, Some(2)), 130);
        assert_eq!(exit_byte(None, Some(9)), 137);
        assert_eq!(exit_byte(None, None), 1);
    }
}
