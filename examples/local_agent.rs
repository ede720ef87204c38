//! An agent on the embedded local model: no API key, no server, no configuration.
//!
//! `cargo run -p kestrel --features local --example local_agent`
//!
//! The agent is built without a model, so it gets the default: `local/smollm2`
//! (SmolLM2-135M-Instruct), downloaded into the model cache on first use (or fetched ahead of
//! time with `kestrel models pull`). Its tool call is generated under a grammar built from the
//! tool's JSON schema, so the arguments always parse and validate. Set `KESTREL_MODEL` or an API
//! key to run the same agent on a hosted model.

use futures::StreamExt;
use kestrel::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// Input of the `add` tool.
#[derive(Deserialize, JsonSchema)]
struct AddInput {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let add = create_tool("add")
        .description("Add two integers.")
        .execute(|input: AddInput, _ctx| async move { Ok(input.a + input.b) });

    let agent = Agent::builder("calculator")
        .instructions("You are a helpful assistant.")
        .tool(add)
        .build()?;

    let mut stream = agent.stream("What is 17 plus 25?").into_stream();
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::ToolCall(call) => println!("tool call: {} {}", call.tool_name, call.args),
            EventKind::ToolResult(result) => println!("tool result: {}", result.result),
            EventKind::TextDelta(delta) => print!("{}", delta.text),
            _ => {}
        }
    }
    println!();
    let result = stream.result().await?;
    println!(
        "({} steps, {} tokens)",
        result.steps.len(),
        result.usage.total_tokens
    );
    Ok(())
}
