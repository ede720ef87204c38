//! `kestrel mcp serve`: the demo instance ([`kestrel_cli::dev`]) as an MCP server on stdin and
//! stdout. Nothing but MCP goes to stdout: every failure before serving is one line on stderr
//! and exit code 2, and the library's logs go to stderr. The server runs until the client
//! closes the session (its end of stdin), then the database is closed cleanly.
//!
//! `kestrel mcp call`: an MCP server's tools listed, or one called, with Kestrel's client; the
//! server's questions answered with `--answer`s, in order.

use std::process::ExitCode;

use kestrel::model::ModelSpec;
use kestrel_cli::dev;

use crate::cli::{McpCallArgs, McpCommand, McpServeArgs};
use crate::exit::{FAILURE, USAGE, fail};
use crate::model_choice::resolved_model_for_command;

/// Runs `kestrel mcp <command>` and returns the exit code.
pub async fn run(command: McpCommand) -> ExitCode {
    match command {
        McpCommand::Serve(args) => serve(args).await,
        McpCommand::Call(args) => call(args).await,
    }
}

/// The exit code of a call stopped on a question no `--answer` answered.
const UNANSWERED: u8 = 3;

async fn call(args: McpCallArgs) -> ExitCode {
    use kestrel::mcp::{McpClient, McpServerConfig, PresetAnswers, Protocol};
    use kestrel::tool::ToolContext;
    let protocol = match args.protocol.as_str() {
        "auto" => Protocol::Auto,
        "stateless" => Protocol::Stateless,
        "legacy" => Protocol::Legacy,
        version => Protocol::Pinned(version.to_owned()),
    };
    let parse = |what: &str, text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| format!("{what} is not JSON: {e} ({text})"))
    };
    let input = match args.args.as_deref().map(|a| parse("--args", a)).transpose() {
        Ok(input) => input.unwrap_or_else(|| serde_json::json!({})),
        Err(error) => return fail(USAGE, error),
    };
    let mut answers = Vec::new();
    for answer in &args.answers {
        match parse("--answer", answer) {
            Ok(answer) => answers.push(answer),
            Err(error) => return fail(USAGE, error),
        }
    }
    let client = match McpClient::builder()
        .server(
            "server",
            McpServerConfig::http(&args.url).protocol(protocol),
        )
        .build()
    {
        Ok(client) => client,
        Err(error) => return fail(USAGE, error),
    };
    let code = async {
        let tools = match client.server_tools("server").await {
            Ok(tools) => tools,
            Err(error) => return fail(FAILURE, error),
        };
        let Some(name) = args.tool else {
            for tool in &tools {
                let name = tool.id().strip_prefix("server_").unwrap_or(tool.id());
                println!("{name}\t{}", tool.description());
            }
            return ExitCode::SUCCESS;
        };
        let id = kestrel::mcp::McpTool::id_for("server", &name);
        let Some(tool) = tools.iter().find(|t| t.id() == id) else {
            return fail(USAGE, format!("the server has no tool {name:?}"));
        };
        // The answers go to the server's questions as they come, within the one call.
        let ctx = ToolContext::standalone(id).with_extension(PresetAnswers(answers));
        match tool.execute(input, ctx).await {
            Ok(output) => {
                println!("{output}");
                ExitCode::SUCCESS
            }
            Err(error) => match error.into_suspension() {
                Ok(question) => {
                    eprintln!("{question}");
                    ExitCode::from(UNANSWERED)
                }
                Err(error) => fail(FAILURE, error.message()),
            },
        }
    }
    .await;
    client.disconnect().await;
    code
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
