//! The repeat penalty: it stops greedy loops in free text and leaves tool calls and JSON
//! answers valid.

use kestrel_llama::{AutoToolPolicy, GenerateRequest, RepeatPenalty, StopReason, ToolChoice};
use serde_json::{Value, json};

use super::{check_calls, engine, run, tools, user};

/// How often the most repeated sentence of `text` occurs.
fn most_repeated_sentence(text: &str) -> usize {
    let mut counts = std::collections::HashMap::new();
    for sentence in text.split(['.', '!', '?', '\n']) {
        let sentence = sentence.trim();
        if sentence.len() > 8 {
            *counts.entry(sentence).or_insert(0) += 1;
        }
    }
    counts.into_values().max().unwrap_or(0)
}

/// Greedy decoding on the 135M model loops ("I'm glad to hear that. I'm glad to hear that. ...");
/// the repeat penalty stops it, and leaves tool calls and JSON answers (whose syntax repeats)
/// valid.
#[test]
fn the_repeat_penalty_stops_loops_in_text_only() {
    let Some(engine) = engine("the_repeat_penalty_stops_loops_in_text_only") else {
        return;
    };
    let penalty = Some(RepeatPenalty::new(1.3, 128));
    // Answered in text by call-then-answer's first step, it loops without a penalty.
    let prompt = || GenerateRequest {
        tools: tools(),
        auto_tool_policy: AutoToolPolicy::CallThenAnswer,
        ..user("Hello! How are you?")
    };
    let plain = run(
        engine,
        GenerateRequest {
            max_tokens: Some(300),
            ..prompt()
        },
    );
    let penalised = run(
        engine,
        GenerateRequest {
            max_tokens: Some(300),
            repeat_penalty: penalty,
            ..prompt()
        },
    );
    println!("without: {:?}\nwith: {:?}", plain.text, penalised.text);
    assert!(
        most_repeated_sentence(&plain.text) >= 4,
        "the prompt no longer loops without a penalty: {:?}",
        plain.text
    );
    assert!(
        most_repeated_sentence(&penalised.text) <= 2,
        "{:?}",
        penalised.text
    );
    assert_eq!(penalised.completion.reason, StopReason::EndOfTurn);

    // Calls and JSON are generated without it: they still parse and validate.
    let tools = tools();
    let out = run(
        engine,
        GenerateRequest {
            tools: tools.clone(),
            tool_choice: ToolChoice::Required,
            repeat_penalty: penalty,
            max_tokens: Some(120),
            ..user("Convert 20 USD to EUR and 30 EUR to USD.")
        },
    );
    check_calls(&tools, &out);
    assert_eq!(out.tool_calls.len(), 1, "{out:?}");
    let schema = json!({
        "type": "object",
        "properties": {"cities": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}},
        "required": ["cities"],
        "additionalProperties": false
    });
    let out = run(
        engine,
        GenerateRequest {
            response_schema: Some(schema.clone()),
            repeat_penalty: penalty,
            max_tokens: Some(120),
            ..user("Name three cities in Spain.")
        },
    );
    let value: Value = serde_json::from_str(&out.text).unwrap();
    assert!(jsonschema::is_valid(&schema, &value), "{value}");
}
