//! The demo instance as an MCP server (`kestrel mcp serve`): the assistant's tools under
//! their own names (`get_weather`, `send_email`, which needs approval, and `book_table`, which
//! asks for a time: both ask the client's user through MCP elicitation, and are refused where
//! the client cannot be asked), the four demo agents as `ask_<agent>`, and the three
//! workflows as `run_<workflow>`.

use kestrel::kestrel::Kestrel;
use kestrel::mcp::McpServer;

use super::{
    ASSISTANT, BOOKING_TOOL, DevError, EMAIL_TOOL, RESEARCH, SUPERVISOR, WEATHER_TOOL, WRITING,
};

/// The id of the demo MCP server (`/api/mcp/kestrel-dev/mcp` over HTTP).
pub const MCP_SERVER_ID: &str = "kestrel-dev";

/// The demo instance's tools, agents and workflows as an MCP server.
pub fn demo_mcp_server(kestrel: &Kestrel) -> Result<McpServer, DevError> {
    let assistant = kestrel.agent(ASSISTANT)?;
    let tools = [WEATHER_TOOL, EMAIL_TOOL, BOOKING_TOOL]
        .into_iter()
        .filter_map(|id| assistant.tools().get(id).cloned());
    let mut server = McpServer::builder(MCP_SERVER_ID)
        .name("Kestrel dev")
        .instructions(
            "The Kestrel demo: weather and booking tools, four agents to ask, three workflows \
             to run.",
        )
        .tools(tools);
    for id in [ASSISTANT, SUPERVISOR, RESEARCH, WRITING] {
        server = server.agent(kestrel.agent(id)?.clone());
    }
    for workflow in kestrel.workflows() {
        server = server.workflow(workflow.clone());
    }
    Ok(server.build()?)
}
