//! A small agent network on the embedded local model: no API key, no server.
//!
//! `cargo run -p kestrel --features local,sqlite --example local_network`
//!
//! The network agent has no model set, so it and its sub-agent get the default,
//! `local/smollm2` (downloaded into the model cache on first use, or ahead of time with
//! `kestrel models pull`). Every routing decision and completion check is structured output,
//! generated under a grammar built from its JSON schema — the primitive ids an enum of those
//! that exist — so on this small model the answers may be weak, but each decision parses and
//! names a real primitive, every time. The example checks that it did.

use futures::StreamExt;
use kestrel::event::EventKind;
use kestrel::memory::Memory;
use kestrel::network::NetworkStatus;
use kestrel::prelude::*;
use kestrel::storage::InMemoryStorage;
use schemars::JsonSchema;
use serde::Deserialize;

/// Input of `shout`.
#[derive(Deserialize, JsonSchema)]
struct Shout {
    /// The text to shout.
    text: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let greeter = Agent::builder("greeter")
        .description("Writes a short, friendly greeting.")
        .instructions("Write one short, friendly greeting.")
        .build()?;
    let shout = create_tool("shout")
        .description("Upper-cases a text.")
        .execute(|input: Shout, _ctx| async move { Ok(input.text.to_uppercase()) });
    let network = Agent::builder("coordinator")
        .instructions("Greet the user with the greeter, or shout a text with shout.")
        .memory(Memory::default())
        .agents([greeter])
        .tool(shout)
        .storage(InMemoryStorage::new())
        .build()?;

    let mut stream = network
        .network("Use the greeter agent to greet Ada")
        .memory("local-network", "user-1")
        .max_steps(2)
        .await?;
    let mut decisions = 0;
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::RoutingAgentEnd(end) => {
                decisions += 1;
                let d = &end.decision;
                println!(
                    "[{}] {} {:?} ({}): {:?}",
                    d.iteration,
                    d.primitive_type.as_str(),
                    d.primitive_id,
                    d.selection_reason,
                    d.prompt
                );
                assert!(
                    ["greeter", "shout", "none"].contains(&d.primitive_id.as_str()),
                    "the routing agent named a primitive that does not exist"
                );
            }
            EventKind::AgentExecutionEnd(end) => println!("    greeter: {}", end.result),
            EventKind::ToolExecutionEnd(end) => println!("    shout: {}", end.result),
            EventKind::NetworkValidationEnd(check) => {
                println!("    complete? {} ({:?})", check.passed, check.reason)
            }
            EventKind::Error(error) => println!("error: {}", error.error),
            _ => {}
        }
    }
    let result = stream.result().await?;
    println!(
        "{:?} after {} iterations: {}",
        result.status,
        result.iteration + 1,
        result.result
    );
    assert!(decisions >= 1, "no routing decision was made");
    assert_ne!(
        result.status,
        NetworkStatus::Failed,
        "a routing decision did not parse: {:?}",
        result.error
    );
    Ok(())
}
