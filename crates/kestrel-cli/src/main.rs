//! `kestrel`: the command-line tool of the Kestrel agent framework.
//!
//! `main` parses the arguments, sets up logging and hands over to one module per subcommand
//! ([`chat`], [`models`], [`dev_command`], [`mcp_command`], [`rag_command`]). Every module reports failures as a [`std::process::ExitCode`]; see
//! [`exit`] for the codes.

mod chat;
mod cli;
mod dev_command;
mod eval_command;
mod exit;
mod input;
mod interrupt;
mod mcp_command;
mod model_choice;
mod models;
mod rag_command;
mod render;
mod terminal;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Commands};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Commands::Chat(args) => chat::run(args).await,
        Commands::Models(command) => models::run(command).await,
        Commands::Dev(args) => dev_command::run(args).await,
        Commands::Mcp(command) => mcp_command::run(command).await,
        Commands::Rag(command) => rag_command::run(command).await,
        Commands::Eval(args) => eval_command::run(args).await,
    }
}

/// Sends library logs (retries, skipped configuration…) to stderr, at `warn` unless
/// `KESTREL_LOG` says otherwise (an `EnvFilter` directive such as `debug` or
/// `kestrel_core=trace`).
fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;

    let filter = EnvFilter::try_from_env("KESTREL_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let ansi = std::io::stderr().is_terminal() && !terminal::no_color();
    // A subscriber can only be missing here if one was already installed; nothing to do then.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .without_time()
        .with_target(false)
        .try_init();
}
