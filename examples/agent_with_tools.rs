//! An agent with two tools, run on the scripted model so it needs no API key.
//!
//! `cargo run -p kestrel --example agent_with_tools`
//!
//! Swap the model for `"openai/gpt-5-mini"` (with `OPENAI_API_KEY` set) to run it for real.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Input of the weather tool.
#[derive(Deserialize, JsonSchema)]
struct WeatherInput {
    /// The city to look up.
    city: String,
}

/// Input of the unit conversion tool.
#[derive(Deserialize, JsonSchema)]
struct ToFahrenheit {
    /// Degrees Celsius.
    celsius: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = create_tool("get_weather")
        .description("Current weather for a city")
        .execute(|input: WeatherInput, _ctx| async move {
            Ok(json!({ "city": input.city, "celsius": 21.5, "sky": "clear" }))
        });
    let convert = create_tool("to_fahrenheit")
        .description("Converts Celsius to Fahrenheit")
        .execute(|input: ToFahrenheit, _ctx| async move { Ok(input.celsius * 9.0 / 5.0 + 32.0) });

    // The scripted model plays the part of an LLM: two parallel tool calls, then an answer.
    let model = ScriptedModel::new()
        .respond(
            ScriptedResponse::tool_call("call-1", "get_weather", json!({"city": "Lisbon"}))
                .and_tool_call("call-2", "to_fahrenheit", r#"{"celsius": 21.5}"#),
        )
        .respond(ScriptedResponse::text_deltas([
            "It is clear in Lisbon, ",
            "21.5 °C (70.7 °F).",
        ]));

    let agent = Agent::builder("weather")
        .instructions("You answer weather questions with the tools you have.")
        .model(Arc::new(model))
        .tool(weather)
        .tool(convert)
        .build()?;

    let mut stream = agent.stream("What's the weather in Lisbon?").into_stream();
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::ToolCall(call) => println!("→ {}({})", call.tool_name, call.args),
            EventKind::ToolResult(r) => println!("← {} = {}", r.tool_name, r.result),
            EventKind::TextDelta(d) => print!("{}", d.text),
            EventKind::Finish(_) => println!(),
            _ => {}
        }
    }
    let result = stream.result().await?;
    println!(
        "finished: {} after {} steps, {} tokens",
        result.finish_reason,
        result.steps.len(),
        result.usage.total_tokens
    );
    Ok(())
}
