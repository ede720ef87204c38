//! One request to a local model, printing the prompt, the events and the result.
//!
//! ```text
//! cargo run --release -p kestrel-llama --example chat -- <model.gguf> [--tools] [--required] [--schema '<json schema>'] [--show-prompt] [--show-grammar] "<user message>"...
//! ```
//!
//! `--tools` offers three demo tools (`get_weather`, `add`, `convert_currency`). Several
//! messages may be given; each is sent as a separate request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kestrel_llama::{
    ChatMessage, Engine, EngineOptions, GenerateRequest, GenerationEvent, ToolChoice, ToolSpec,
};
use serde_json::json;

fn demo_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather in a city.".into(),
            parameters: json!({"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"],"additionalProperties":false}),
            auxiliary: false,
        },
        ToolSpec {
            name: "add".into(),
            description: "Add two numbers.".into(),
            parameters: json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"additionalProperties":false}),
            auxiliary: false,
        },
        ToolSpec {
            name: "convert_currency".into(),
            description: "Convert an amount of money from one currency to another.".into(),
            parameters: json!({"type":"object","properties":{"amount":{"type":"number"},"from":{"type":"string","description":"ISO 4217 code, e.g. USD"},"to":{"type":"string","description":"ISO 4217 code, e.g. EUR"}},"required":["amount","from","to"],"additionalProperties":false}),
            auxiliary: false,
        },
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut path = None;
    let mut tools = false;
    let mut only: Option<String> = None;
    let mut required = false;
    let mut schema = None;
    let mut show_prompt = false;
    let mut show_grammar = false;
    let mut show_deltas = false;
    let mut system = None;
    let mut after_call: Option<(String, String, String)> = None;
    let mut no_tools = false;
    let mut call_then_answer = false;
    let mut messages = Vec::new();
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--tools" => tools = true,
            "--only" => only = iter.next(),
            "--required" => required = true,
            "--show-prompt" => show_prompt = true,
            "--show-grammar" => show_grammar = true,
            "--show-deltas" => show_deltas = true,
            "--schema" => schema = Some(serde_json::from_str(&iter.next().unwrap()).unwrap()),
            "--system" => system = iter.next(),
            "--after-call" => {
                let name = iter.next().unwrap();
                let arguments = iter.next().unwrap();
                let result = iter.next().unwrap();
                after_call = Some((name, arguments, result));
            }
            "--no-tools" => no_tools = true,
            "--call-then-answer" => call_then_answer = true,
            _ if path.is_none() => path = Some(arg),
            _ => messages.push(arg),
        }
    }
    let engine = Engine::load(path.expect("a model path"), EngineOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    for message in messages {
        let mut conversation = Vec::new();
        if let Some(system) = &system {
            conversation.push(ChatMessage::system(system.clone()));
        }
        conversation.push(ChatMessage::user(message.clone()));
        if let Some((name, arguments, result)) = &after_call {
            conversation.push(ChatMessage::assistant_tool_calls(
                "",
                vec![kestrel_llama::ToolCall {
                    name: name.clone(),
                    arguments: arguments.clone(),
                }],
            ));
            conversation.push(ChatMessage::tool_result(name.clone(), result.clone()));
        }
        let request = GenerateRequest {
            tools: if tools {
                demo_tools()
                    .into_iter()
                    .filter(|t| only.as_ref().is_none_or(|o| &t.name == o))
                    .collect()
            } else {
                Vec::new()
            },
            tool_choice: if required {
                ToolChoice::Required
            } else if no_tools {
                ToolChoice::None
            } else {
                ToolChoice::Auto
            },
            response_schema: schema.clone(),
            auto_tool_policy: if call_then_answer {
                kestrel_llama::AutoToolPolicy::CallThenAnswer
            } else {
                kestrel_llama::AutoToolPolicy::ModelDecides
            },
            max_tokens: Some(200),
            ..GenerateRequest::new(conversation)
        };
        if show_prompt {
            println!("--- prompt\n{}", engine.render_prompt(&request).unwrap());
        }
        if show_grammar {
            println!(
                "--- grammar\n{}",
                engine.grammar(&request).unwrap().unwrap_or_default()
            );
        }
        println!("=== {message}");
        let mut generation = engine.generate(request).unwrap();
        while let Some(event) = generation.blocking_next() {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    println!("error: {e}");
                    break;
                }
            };
            match event {
                GenerationEvent::Text(t) => print!("{t}"),
                GenerationEvent::ToolCallDelta { delta, .. } if show_deltas => print!("{delta}"),
                GenerationEvent::ToolCallEnd {
                    name, arguments, ..
                } => println!("[call {name} {arguments}]"),
                GenerationEvent::Finished(c) => println!(
                    "\n--- {:?}, {} prompt + {} generated tokens, {:.1} tok/s; peak RSS {}",
                    c.reason,
                    c.prompt_tokens,
                    c.completion_tokens,
                    f64::from(c.completion_tokens.saturating_sub(1))
                        / (c.generation_micros as f64 / 1e6),
                    std::fs::read_to_string("/proc/self/status")
                        .unwrap_or_default()
                        .lines()
                        .find(|l| l.starts_with("VmHWM"))
                        .unwrap_or("")
                        .trim_start_matches("VmHWM:")
                        .trim()
                ),
                _ => {}
            }
        }
    }
}
