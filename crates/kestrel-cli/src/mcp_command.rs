//! `kestrel mcp serve`: the demo instance ([`kestrel_cli::dev`]) as an MCP server on stdin and
//! stdout.
//!
//! Nothing but MCP goes to stdout: every failure before serving is one line on stderr and
//! exit code 2, and the library's logs go to stderr. The server runs until the client closes
//! the session (its end of stdin), then the database is closed cleanly.

use std::process::ExitCode;

use kestrel::model::ModelSpec;
use kestrel_cli::dev;

use crate::cli::{McpCommand, McpServeArgs};
use crate::exit::{FAILURE, USAGE, fail};
use crate::model_choice::resolved_model_for_command;

/// Runs `kestrel mcp <command>` and returns the exit code.
pub async fn run(command: McpCommand) -> ExitCode {
    match command {
        McpCommand::Serve(args) => serve(args).await,
    }
}

async fn serve(args: McpServeArgs) -> ExitCode {
    let model = match resolved_model_for_command(args.model.as_deref()).await {
        Ok((_, model)) => model,
        Err(code) => return code,
    };
    let storage = match dev::open_database(&args.db, &args.schema).await {
        Ok(storage) => storage,
        Err(error) => return fail(USAGE, error),
    };
    let server = dev::demo_kestrel(ModelSpec::Model(model), storage.storage())
        .and_then(|kestrel| dev::demo_mcp_server(&kestrel));
    let server = match server {
        Ok(server) => server,
        Err(error) => return fail(USAGE, error),
    };
    tracing::info!(tools = server.tools().len(), "serving MCP on stdio");
    let served = server.serve_stdio().await;
    storage.close().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(FAILURE, error),
    }
}
