//! The engine on a real model. Set `KESTREL_TEST_GGUF` to a GGUF file (SmolLM2-135M-Instruct
//! Q4_1 is what these were written against); without it the model tests print a message and
//! pass. The file-error tests need no model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The tests, by topic; the shared engine and the helpers they use are here.
mod files;
mod generation;
mod repeat_penalty;
mod schemas;
mod tools;

use std::path::PathBuf;
use std::sync::OnceLock;

use kestrel_llama::{ChatMessage, Engine, EngineOptions, GenerateRequest, Output, ToolSpec};
use serde_json::{Value, json};

fn model_path() -> Option<PathBuf> {
    match std::env::var_os("KESTREL_TEST_GGUF") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => None,
    }
}

/// The shared engine, or `None` (with a message) when no model is configured.
fn engine(test: &str) -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    let engine = ENGINE.get_or_init(|| {
        let path = model_path()?;
        Some(
            Engine::load(
                &path,
                EngineOptions {
                    context_size: 2048,
                    ..EngineOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display())),
        )
    });
    if engine.is_none() {
        println!("skipping {test}: set KESTREL_TEST_GGUF to a GGUF model file to run it");
    }
    engine.as_ref()
}

fn user(text: &str) -> GenerateRequest {
    GenerateRequest::new(vec![ChatMessage::user(text)])
}

fn run(engine: &Engine, request: GenerateRequest) -> Output {
    engine
        .generate(request)
        .unwrap()
        .collect_blocking()
        .unwrap()
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
            "additionalProperties": false
        }),
        auxiliary: false,
    }
}

fn add_tool() -> ToolSpec {
    ToolSpec {
        name: "add".into(),
        description: "Add two numbers.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": false
        }),
        auxiliary: false,
    }
}

fn currency_tool() -> ToolSpec {
    ToolSpec {
        name: "convert_currency".into(),
        description: "Convert an amount of money from one currency to another.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number", "exclusiveMinimum": 0},
                "from": {"type": "string", "description": "ISO 4217 code, e.g. USD", "pattern": "^[A-Z]{3}$"},
                "to": {"type": "string", "description": "ISO 4217 code, e.g. EUR", "pattern": "^[A-Z]{3}$"}
            },
            "required": ["amount", "from", "to"],
            "additionalProperties": false
        }),
        auxiliary: false,
    }
}

fn tools() -> Vec<ToolSpec> {
    // `exclusiveMinimum` on a number cannot be enforced; the grammar test below checks that.
    let mut currency = currency_tool();
    currency.parameters["properties"]["amount"] = json!({"type": "number"});
    vec![weather_tool(), add_tool(), currency]
}

fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Checks that each call names an offered tool and has arguments valid for its schema.
fn check_calls(tools: &[ToolSpec], output: &Output) {
    for call in &output.tool_calls {
        let tool = tools
            .iter()
            .find(|t| t.name == call.name)
            .unwrap_or_else(|| panic!("call to unknown tool {:?}", call.name));
        let arguments: Value = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|e| panic!("arguments {:?} are not JSON: {e}", call.arguments));
        validate(&tool.parameters, &arguments).unwrap_or_else(|e| {
            panic!(
                "arguments {} do not match {}: {e}",
                call.arguments, tool.parameters
            )
        });
    }
}
