//! Tool calls: validity under every tool choice and policy, auxiliary tools, streamed
//! arguments, and the answer after a tool result.

use kestrel_llama::{
    AutoToolPolicy, ChatMessage, GenerateRequest, GenerationEvent, StopReason, ToolChoice, ToolSpec,
};
use serde_json::json;

use super::{check_calls, engine, run, tools, user, validate, weather_tool};

const TOOL_PROMPTS: &[&str] = &[
    "What's the weather like in Paris?",
    "Is it raining in Berlin right now?",
    "What's the temperature in Tokyo today?",
    "Should I bring an umbrella in London?",
    "How cold is it in Moscow?",
    "Weather report for Sydney, please.",
    "Is it sunny in Madrid?",
    "What is 17 plus 25?",
    "Add 3 and 4.",
    "What is the sum of 1.5 and 2.25?",
    "Please add 1000 and 2345.",
    "How much is 12 + 30?",
    "I have 7 apples and buy 5 more. Use the calculator to add them.",
    "Convert 100 euros to US dollars.",
    "How many Japanese yen is 250 US dollars?",
    "I need 50 GBP in euros.",
    "Exchange 75 Swiss francs into US dollars.",
    "What is 1000 Indian rupees in euros?",
    "Convert 20 USD to CAD.",
    "How much is 300 Chinese yuan in Japanese yen?",
    "Check the weather in New York and tell me if I need a coat.",
    "Add 2.5 to 7.5 for me.",
];

#[test]
fn tool_calls_always_validate() {
    let Some(engine) = engine("tool_calls_always_validate") else {
        return;
    };
    let tools = tools();
    let expected = |prompt: &str| -> &str {
        let p = prompt.to_lowercase();
        if [
            "weather",
            "rain",
            "temperature",
            "umbrella",
            "cold",
            "sunny",
            "coat",
        ]
        .iter()
        .any(|w| p.contains(w))
        {
            "get_weather"
        } else if ["add", "plus", "sum", "+"].iter().any(|w| p.contains(w)) {
            "add"
        } else {
            "convert_currency"
        }
    };
    let mut right_tool = 0;
    let mut calls = 0;
    for prompt in TOOL_PROMPTS {
        let out = run(
            engine,
            GenerateRequest {
                tools: tools.clone(),
                tool_choice: ToolChoice::Required,
                max_tokens: Some(120),
                ..user(prompt)
            },
        );
        assert_eq!(
            out.completion.reason,
            StopReason::ToolCalls,
            "{prompt}: {out:?}"
        );
        assert_eq!(out.tool_calls.len(), 1, "{prompt}: {out:?}");
        check_calls(&tools, &out);
        calls += out.tool_calls.len();
        let call = &out.tool_calls[0];
        if call.name == expected(prompt) {
            right_tool += 1;
        }
        println!("{prompt} -> {} {}", call.name, call.arguments);
    }
    println!(
        "{calls} calls for {} prompts, all valid; right tool {right_tool}/{}",
        TOOL_PROMPTS.len(),
        TOOL_PROMPTS.len()
    );
    assert!(TOOL_PROMPTS.len() >= 20);
}

#[test]
fn model_decides_mode_produces_text_or_valid_calls() {
    let Some(engine) = engine("model_decides_mode_produces_text_or_valid_calls") else {
        return;
    };
    let tools = tools();
    let mut summary = Vec::new();
    for prompt in [
        "What's the weather like in Paris?",
        "What is 17 plus 25?",
        "Tell me a joke.",
        "What is the capital of France?",
    ] {
        let out = run(
            engine,
            GenerateRequest {
                tools: tools.clone(),
                auto_tool_policy: AutoToolPolicy::ModelDecides,
                max_tokens: Some(60),
                ..user(prompt)
            },
        );
        check_calls(&tools, &out);
        if out.tool_calls.is_empty() {
            assert!(!out.text.is_empty(), "{prompt}: empty answer");
            assert!(!out.text.starts_with('<'), "{prompt}: {:?}", out.text);
            summary.push(format!("{prompt} -> text"));
        } else {
            summary.push(format!("{prompt} -> call {}", out.tool_calls[0].name));
        }
    }
    println!("model decides: {}", summary.join("; "));
}

const NO_TOOL_PROMPTS: &[&str] = &[
    "Tell me a joke.",
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Who wrote Hamlet?",
    "Hello! How are you?",
    "Translate 'good morning' into Spanish.",
];

/// Call-then-answer's first step calls a tool or replies directly: tool prompts still call
/// (and validate), and prompts no tool fits are answered in text more often than not.
#[test]
fn call_then_answer_calls_or_replies_directly() {
    let Some(engine) = engine("call_then_answer_calls_or_replies_directly") else {
        return;
    };
    let tools = tools();
    let decide = |prompt: &str| {
        let out = run(
            engine,
            GenerateRequest {
                tools: tools.clone(),
                auto_tool_policy: AutoToolPolicy::CallThenAnswer,
                max_tokens: Some(60),
                ..user(prompt)
            },
        );
        check_calls(&tools, &out);
        if out.tool_calls.is_empty() {
            assert!(!out.text.trim().is_empty(), "{prompt}: empty answer");
            assert!(!out.text.starts_with('<'), "{prompt}: {:?}", out.text);
            // A text answer, cut or not: never a call's reason.
            assert!(
                matches!(
                    out.completion.reason,
                    StopReason::EndOfTurn | StopReason::MaxTokens
                ),
                "{prompt}: {:?}",
                out.completion
            );
        } else {
            assert_eq!(out.completion.reason, StopReason::ToolCalls, "{prompt}");
        }
        out
    };
    let mut called = 0;
    for prompt in &TOOL_PROMPTS[..8] {
        let out = decide(prompt);
        match out.tool_calls.first() {
            Some(call) => {
                called += 1;
                println!("{prompt} -> call {} {}", call.name, call.arguments);
            }
            None => println!("{prompt} -> text {:?}", out.text),
        }
    }
    let mut replied = 0;
    for prompt in NO_TOOL_PROMPTS {
        let out = decide(prompt);
        match out.tool_calls.first() {
            Some(call) => println!("{prompt} -> call {} {}", call.name, call.arguments),
            None => {
                replied += 1;
                println!("{prompt} -> text {:?}", out.text);
            }
        }
    }
    println!(
        "call-then-answer: {called}/8 tool prompts called, {replied}/{} other prompts answered in text",
        NO_TOOL_PROMPTS.len()
    );
    // Measured: 4 of 8 and 5 of 6. With no instructions naming the tools (as here) the 135M
    // model answers half the weather questions itself; the demo assistant's instructions
    // name them, and there it calls the right tool for 22 of 23 tool prompts (BENCHMARKS.md).
    assert!(called >= 3, "{called}/8 tool prompts called a tool");
    assert!(
        replied * 2 > NO_TOOL_PROMPTS.len(),
        "{replied} text answers"
    );
}

/// Auxiliary tools (memory's) are never the forced call: not under call-then-answer's first
/// step (where they are not even shown), not under `Required`.
#[test]
fn auxiliary_tools_are_never_forced() {
    let Some(engine) = engine("auxiliary_tools_are_never_forced") else {
        return;
    };
    let memory = ToolSpec::new(
        "update_working_memory",
        "Replaces your working memory (notes about the user and the conversation) with the \
         complete new Markdown text.",
        json!({
            "type": "object",
            "properties": {"memory": {"type": "string"}},
            "required": ["memory"],
            "additionalProperties": false
        }),
    )
    .auxiliary();
    let tools = vec![weather_tool(), memory];
    for prompt in [
        "My name is Ada and I love sailing.",
        "Remember that I prefer window seats.",
        "What's the weather in Lisbon?",
    ] {
        for (policy, choice) in [
            (AutoToolPolicy::CallThenAnswer, ToolChoice::Auto),
            (AutoToolPolicy::ModelDecides, ToolChoice::Required),
        ] {
            let request = GenerateRequest {
                tools: tools.clone(),
                tool_choice: choice.clone(),
                auto_tool_policy: policy,
                max_tokens: Some(40),
                ..user(prompt)
            };
            let rendered = engine.render_prompt(&request).unwrap();
            let out = run(engine, request);
            println!(
                "{prompt} ({policy:?}, {choice:?}) -> {:?} {:?}",
                out.tool_calls, out.text
            );
            assert!(
                out.tool_calls.iter().all(|c| c.name == "get_weather"),
                "{prompt}: {out:?}"
            );
            if policy == AutoToolPolicy::CallThenAnswer {
                assert!(!rendered.contains("update_working_memory"), "{rendered}");
            }
        }
    }
}

#[test]
fn after_a_tool_result_the_model_answers() {
    let Some(engine) = engine("after_a_tool_result_the_model_answers") else {
        return;
    };
    let messages = vec![
        ChatMessage::user("What is 17 plus 25?"),
        ChatMessage::assistant_tool_calls(
            "",
            vec![kestrel_llama::ToolCall {
                name: "add".into(),
                arguments: r#"{"a": 17, "b": 25}"#.into(),
            }],
        ),
        ChatMessage::tool_result("add", "42"),
    ];
    let out = run(
        engine,
        GenerateRequest {
            tools: tools(),
            auto_tool_policy: AutoToolPolicy::CallThenAnswer,
            max_tokens: Some(60),
            ..GenerateRequest::new(messages)
        },
    );
    assert!(out.tool_calls.is_empty());
    assert!(out.text.contains("42"), "{:?}", out.text);
}

#[test]
fn forced_tool_and_streamed_arguments() {
    let Some(engine) = engine("forced_tool_and_streamed_arguments") else {
        return;
    };
    let tools = tools();
    let mut generation = engine
        .generate(GenerateRequest {
            tools: tools.clone(),
            tool_choice: ToolChoice::Tool("get_weather".into()),
            max_tokens: Some(80),
            ..user("I am flying to Rome tomorrow.")
        })
        .unwrap();
    let mut started = None;
    let mut deltas = String::new();
    let mut ended = None;
    let mut finished = None;
    while let Some(event) = generation.blocking_next() {
        match event.unwrap() {
            GenerationEvent::ToolCallStart { index, name } => started = Some((index, name)),
            GenerationEvent::ToolCallDelta { delta, .. } => {
                assert!(started.is_some());
                deltas.push_str(&delta);
            }
            GenerationEvent::ToolCallEnd {
                name, arguments, ..
            } => ended = Some((name, arguments)),
            GenerationEvent::Text(text) => panic!("unexpected text {text:?} in a forced call"),
            GenerationEvent::Finished(c) => finished = Some(c),
        }
    }
    assert_eq!(started, Some((0, "get_weather".to_string())));
    let (name, arguments) = ended.unwrap();
    assert_eq!(name, "get_weather");
    assert_eq!(arguments, deltas);
    validate(
        &tools[0].parameters,
        &serde_json::from_str(&arguments).unwrap(),
    )
    .unwrap();
    assert_eq!(finished.unwrap().reason, StopReason::ToolCalls);
}

/// After a tool result SmolLM2 tends to imitate the call it sees in its history: with no
/// tools shown and nothing constraining it, it wrote another `<tool_call>[...]</tool_call>`
/// block as its answer (seen in `kestrel dev`). The answer step must give text.
#[test]
fn an_answer_after_tool_calls_is_not_another_call_written_as_text() {
    let Some(engine) = engine("an_answer_after_tool_calls_is_not_another_call_written_as_text")
    else {
        return;
    };
    let system = ChatMessage::system(
        "You are a helpful assistant. Use get_weather for weather questions, book_table to book a \
         restaurant and send_email to send an email. Answer briefly.",
    );
    let cases = [
        (
            "get_weather",
            r#"{"city": "Paris"}"#,
            r#"{"city":"Paris","forecast":"sunny","celsius":21}"#,
        ),
        ("add", r#"{"a": 17, "b": 25}"#, "42"),
        (
            "convert_currency",
            r#"{"amount": 10, "from": "EUR", "to": "USD"}"#,
            r#"{"result": 10.8}"#,
        ),
        (
            "update_working_memory",
            r#"{"memory":"Paris"}"#,
            r#"{"success":true}"#,
        ),
        (
            "update_working_memory",
            r#"{"memory":"Paris"}"#,
            "Error: update_working_memory needs a run with memory (a thread and a resource)",
        ),
        (
            "get_weather",
            r#"{"city": "Paris"}"#,
            "Error: the weather service is down",
        ),
    ];
    let questions = [
        "What is the weather in Paris?",
        "What is 17 plus 25?",
        "How much is 10 EUR in USD?",
        "What is the weather in Paris?",
        "What is the weather in Paris?",
        "What is the weather in Paris?",
    ];
    for ((name, arguments, result), question) in cases.iter().zip(questions) {
        let messages = vec![
            system.clone(),
            ChatMessage::user(question),
            ChatMessage::assistant_tool_calls(
                "",
                vec![kestrel_llama::ToolCall {
                    name: (*name).into(),
                    arguments: (*arguments).into(),
                }],
            ),
            ChatMessage::tool_result(*name, *result),
        ];
        let out = run(
            engine,
            GenerateRequest {
                tools: tools(),
                auto_tool_policy: AutoToolPolicy::CallThenAnswer,
                max_tokens: Some(60),
                ..GenerateRequest::new(messages)
            },
        );
        println!("{question} -> {:?}", out.text);
        assert!(out.tool_calls.is_empty());
        assert!(
            !out.text.trim_start().starts_with('<') && !out.text.contains("<tool_call>"),
            "{question}: {:?}",
            out.text
        );
    }
}
