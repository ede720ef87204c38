//! Resolving `provider/model` strings through the built-in providers configured from a lookup
//! function. Only 127.0.0.1 is ever contacted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use crate::fake_server::{FakeServer, Reply};
use kestrel_core::message::Message;
use kestrel_core::model::{ModelRegistry, ModelRequest, UnknownModel, generate};
use serde_json::json;

fn registry(vars: &[(&str, &str)]) -> ModelRegistry {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ModelRegistry::from_env_with(move |key| vars.get(key).cloned())
}

fn missing_credentials(result: Result<impl Sized, UnknownModel>) -> String {
    match result {
        Err(UnknownModel::MissingCredentials { variable, .. }) => variable,
        Err(other) => panic!("expected missing credentials, got {other:?}"),
        Ok(_) => panic!("expected missing credentials, got a model"),
    }
}

/// A minimal OpenAI stream answering "pong".
fn pong() -> Reply {
    Reply::sse([
        format!(
            "data: {}\n\n",
            json!({ "choices": [{ "index": 0, "delta": { "content": "pong" }, "finish_reason": "stop" }] })
        ),
        "data: [DONE]\n\n".to_string(),
    ])
}

fn ping() -> ModelRequest {
    ModelRequest {
        messages: vec![Message::user("ping")].into(),
        ..Default::default()
    }
}

#[test]
fn registers_the_built_in_providers() {
    let providers = registry(&[]).providers();
    for name in [
        "anthropic",
        "deepseek",
        "groq",
        "ollama",
        "openai",
        "openrouter",
    ] {
        assert!(
            providers.contains(&name.to_string()),
            "{name} missing from {providers:?}"
        );
    }
}

#[test]
fn resolves_an_openai_model() {
    let model = registry(&[("OPENAI_API_KEY", "sk-test")])
        .resolve("openai/gpt-5-mini")
        .unwrap();
    assert_eq!(model.provider(), "openai");
    assert_eq!(model.model_id(), "gpt-5-mini");
}

#[test]
fn a_missing_key_names_the_variable() {
    let registry = registry(&[("OPENAI_API_KEY", "")]);
    assert_eq!(
        missing_credentials(registry.resolve("openai/gpt-5-mini")),
        "OPENAI_API_KEY"
    );
    assert_eq!(
        missing_credentials(registry.resolve("anthropic/claude-sonnet-4-5")),
        "ANTHROPIC_API_KEY"
    );
    assert_eq!(
        missing_credentials(registry.resolve("deepseek/deepseek-chat")),
        "DEEPSEEK_API_KEY"
    );
    assert_eq!(
        missing_credentials(registry.resolve("groq/llama-3.3-70b")),
        "GROQ_API_KEY"
    );
    let error = registry
        .resolve("openai/gpt-5-mini")
        .unwrap_err()
        .to_string();
    assert!(error.contains("OPENAI_API_KEY"), "{error}");
}

#[test]
fn an_unknown_provider_lists_the_known_ones() {
    match registry(&[]).resolve("nope/model") {
        Err(UnknownModel::UnknownProvider {
            provider, known, ..
        }) => {
            assert_eq!(provider, "nope");
            assert!(known.contains(&"openai".to_string()), "{known:?}");
            assert!(known.contains(&"anthropic".to_string()), "{known:?}");
        }
        other => panic!("expected an unknown provider, got {other:?}"),
    }
    assert!(matches!(
        registry(&[]).resolve("gpt-5-mini"),
        Err(UnknownModel::InvalidFormat { .. })
    ));
}

#[test]
fn the_model_part_keeps_its_slashes() {
    let model = registry(&[("OPENROUTER_API_KEY", "sk-or")])
        .resolve("openrouter/meta-llama/llama-3")
        .unwrap();
    assert_eq!(model.provider(), "openrouter");
    assert_eq!(model.model_id(), "meta-llama/llama-3");
}

#[test]
fn ollama_needs_no_key() {
    let model = registry(&[]).resolve("ollama/qwen3:8b").unwrap();
    assert_eq!(model.provider(), "ollama");
    assert_eq!(model.model_id(), "qwen3:8b");
}

#[tokio::test]
async fn a_custom_openai_base_url_makes_the_key_optional() {
    let server = FakeServer::start(vec![pong()]).await;
    let registry = registry(&[("OPENAI_BASE_URL", &server.base("/v1"))]);
    let model = registry.resolve("openai/local-model").unwrap();
    let answer = generate(model.as_ref(), ping()).await.unwrap();
    assert_eq!(answer.text, "pong");
    let request = server.single_request();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["model"], "local-model");
    assert!(!request.headers.contains_key("authorization"));
}

#[tokio::test]
async fn base_url_overrides_apply_to_well_known_providers() {
    let server = FakeServer::start(vec![pong()]).await;
    let registry = registry(&[
        ("DEEPSEEK_BASE_URL", &server.base("/v1")),
        ("DEEPSEEK_API_KEY", "sk-ds"),
    ]);
    let model = registry.resolve("deepseek/deepseek-reasoner").unwrap();
    generate(model.as_ref(), ping()).await.unwrap();
    let request = server.single_request();
    assert_eq!(request.headers["authorization"], "Bearer sk-ds");
    assert_eq!(request.body["model"], "deepseek-reasoner");
}

#[tokio::test]
async fn custom_openai_compatible_endpoints_are_registered_by_name() {
    let server = FakeServer::start(vec![pong()]).await;
    let registry = registry(&[
        ("KESTREL_OPENAI_COMPATIBLE", "my-vllm, lmstudio"),
        (
            "KESTREL_OPENAI_COMPATIBLE_MY_VLLM_BASE_URL",
            &server.base("/v1"),
        ),
        ("KESTREL_OPENAI_COMPATIBLE_MY_VLLM_API_KEY", "sk-vllm"),
        // Listed but without a base URL: skipped.
    ]);
    let providers = registry.providers();
    assert!(providers.contains(&"my-vllm".to_string()), "{providers:?}");
    assert!(
        !providers.contains(&"lmstudio".to_string()),
        "{providers:?}"
    );

    let model = registry.resolve("my-vllm/Qwen/Qwen3-8B").unwrap();
    assert_eq!(model.provider(), "my-vllm");
    assert_eq!(model.model_id(), "Qwen/Qwen3-8B");
    let answer = generate(model.as_ref(), ping()).await.unwrap();
    assert_eq!(answer.text, "pong");
    let request = server.single_request();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer sk-vllm");
    assert_eq!(request.body["model"], "Qwen/Qwen3-8B");
    // A compatible server gets `max_tokens`, not OpenAI's `max_completion_tokens`.
    assert!(request.body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn anthropic_uses_its_base_url_and_key() {
    let server = FakeServer::start(vec![Reply::sse([
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"pong\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ])])
    .await;
    let registry = registry(&[
        ("ANTHROPIC_BASE_URL", &server.url),
        ("ANTHROPIC_API_KEY", "sk-ant"),
    ]);
    let model = registry.resolve("anthropic/claude-haiku-4-5").unwrap();
    let answer = generate(model.as_ref(), ping()).await.unwrap();
    assert_eq!(answer.text, "pong");
    let request = server.single_request();
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], "sk-ant");
}
