//! Run-level behaviour: structured output, abort, max steps, dynamic configuration, bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::abort::AbortSignal;
use kestrel_core::agent::{Agent, AgentBuildError, AgentError, ErrorStrategy, StructuredOutput};
use kestrel_core::context::RequestContext;
use kestrel_core::event::EventKind;
use kestrel_core::kestrel::{Kestrel, KestrelError};
use kestrel_core::model::{
    FinishReason, ModelError, ModelRegistry, ModelSpec, ResponseFormat, ScriptedModel,
    ScriptedResponse, UnknownModel,
};
use kestrel_core::tool::{ToolContext, ToolDefinitionError, create_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Weather {
    city: String,
    celsius: f64,
}

fn agent_with(model: ScriptedModel) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(model);
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    (agent, model)
}

#[tokio::test]
async fn structured_output_is_parsed_validated_and_sent_as_response_format() {
    let (agent, model) = agent_with(ScriptedModel::new().respond(ScriptedResponse::text(
        "```json\n{\"city\": \"Oslo\", \"celsius\": -3.5}\n```",
    )));
    let result = agent
        .generate("weather?")
        .structured_output(StructuredOutput::of::<Weather>())
        .await
        .unwrap();
    assert_eq!(
        result.object_as::<Weather>().unwrap(),
        Some(Weather {
            city: "Oslo".into(),
            celsius: -3.5
        })
    );
    match &model.requests()[0].response_format {
        Some(ResponseFormat::Json { schema, name }) => {
            assert_eq!(schema["required"], json!(["city", "celsius"]));
            assert_eq!(name.as_deref(), Some("Weather"));
        }
        other => panic!("expected a JSON response format, got {other:?}"),
    }
}

#[tokio::test]
async fn structured_output_strategies() {
    let bad = || ScriptedModel::new().respond(ScriptedResponse::text(r#"{"city": "Oslo"}"#));

    let (agent, _) = agent_with(bad());
    let (events, result) = agent
        .stream("w")
        .structured_output(StructuredOutput::of::<Weather>())
        .into_stream()
        .collect()
        .await;
    match result {
        Err(AgentError::StructuredOutput { message, text, .. }) => {
            assert!(message.contains("celsius"), "{message}");
            assert_eq!(text, r#"{"city": "Oslo"}"#);
        }
        other => panic!("expected a structured output error, got {other:?}"),
    }
    let last = events.last().unwrap();
    assert_eq!(last.type_name(), "error");
    assert!(last.to_json().contains("\"kind\":\"structured-output\""));

    let (agent, _) = agent_with(bad());
    let result = agent
        .generate("w")
        .structured_output(StructuredOutput::of::<Weather>().error_strategy(ErrorStrategy::Warn))
        .await
        .unwrap();
    assert_eq!(result.object, None);
    assert_eq!(result.finish_reason, FinishReason::Stop);

    let (agent, _) =
        agent_with(ScriptedModel::new().respond(ScriptedResponse::text("not json at all")));
    let fallback = json!({"city": "unknown", "celsius": 0.0});
    let result = agent
        .generate("w")
        .structured_output(
            StructuredOutput::of::<Weather>()
                .error_strategy(ErrorStrategy::Fallback(fallback.clone())),
        )
        .await
        .unwrap();
    assert_eq!(result.object, Some(fallback));
}

#[tokio::test]
async fn abort_during_the_model_call_ends_the_stream_with_abort() {
    let (agent, _) = agent_with(
        ScriptedModel::new().respond(
            ScriptedResponse::text("first")
                .and_step(kestrel_core::model::ScriptStep::Delay(Duration::from_secs(
                    30,
                )))
                .and_text("never"),
        ),
    );
    let signal = AbortSignal::new();
    let mut stream = agent
        .stream("hi")
        .abort_signal(signal.clone())
        .into_stream();
    let mut types = Vec::new();
    while let Some(event) = stream.next().await {
        if let EventKind::TextDelta(d) = &event.kind {
            assert_eq!(d.text, "first");
            signal.abort();
        }
        types.push(event.type_name());
    }
    assert_eq!(types.last(), Some(&"abort"));
    assert!(!types.contains(&"finish"));
    assert!(matches!(
        stream.result().await,
        Err(AgentError::Aborted { .. })
    ));
}

#[tokio::test]
async fn tools_see_the_abort_signal() {
    let saw = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let saw2 = saw.clone();
    let tool = create_tool("wait")
        .description("Waits until aborted")
        .input_schema(json!({"type": "object"}))
        .execute(move |_: Value, ctx: ToolContext| {
            let saw = saw2.clone();
            async move {
                ctx.abort_signal().aborted().await;
                saw.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(json!("saw abort"))
            }
        });
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::tool_call(
        "w1",
        "wait",
        json!({}),
    )));
    let agent = Agent::builder("a").model(model).tool(tool).build().unwrap();
    let mut stream = agent.stream("hi").into_stream();
    while let Some(event) = stream.next().await {
        if event.type_name() == "tool-call" {
            stream.abort();
        }
        if event.type_name() == "abort" {
            break;
        }
    }
    assert!(matches!(
        stream.result().await,
        Err(AgentError::Aborted { .. })
    ));
    assert!(
        saw.load(std::sync::atomic::Ordering::SeqCst),
        "the tool observed the abort"
    );
}

#[tokio::test]
async fn max_steps_finishes_cleanly_with_its_reason() {
    let tool = create_tool("again")
        .description("x")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async move { Ok(1) });
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        ScriptedResponse::tool_call(format!("c{}", req.messages.len()), "again", json!({}))
    }));
    let agent = Agent::builder("a")
        .model(model.clone())
        .tool(tool)
        .max_steps(3)
        .build()
        .unwrap();
    let (events, result) = agent.stream("loop").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.finish_reason, FinishReason::MaxSteps);
    assert_eq!(result.steps.len(), 3);
    assert_eq!(model.calls(), 3);
    let finish = events.last().unwrap();
    assert!(
        finish
            .to_json()
            .contains(r#""stepResult":{"reason":"max-steps","isContinued":false}"#)
    );
    // The last step-finish says nothing follows.
    let last_step = events
        .iter()
        .rev()
        .find(|e| e.type_name() == "step-finish")
        .unwrap();
    assert!(last_step.to_json().contains(r#""isContinued":false"#));

    // Per call, max_steps overrides the agent's.
    let agent2 = Agent::builder("a")
        .model(model.clone())
        .tool(
            create_tool("again")
                .description("x")
                .input_schema(json!({"type": "object"}))
                .execute(|_: Value, _ctx| async move { Ok(1) }),
        )
        .build()
        .unwrap();
    let result = agent2.generate("loop").max_steps(1).await.unwrap();
    assert_eq!(result.steps.len(), 1);
}

#[tokio::test]
async fn model_errors_fail_the_run_with_an_error_event() {
    let (agent, _) = agent_with(ScriptedModel::new().respond(ScriptedResponse::error(
        ModelError::Auth {
            provider: "openai".into(),
            status: 401,
            message: "bad key".into(),
        },
    )));
    let (events, result) = agent.stream("hi").into_stream().collect().await;
    match result {
        Err(AgentError::Model {
            source: ModelError::Auth { status: 401, .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(events.last().unwrap().type_name(), "error");
    assert!(events.last().unwrap().to_json().contains("bad key"));

    // A script that runs out is a clear error too.
    let (agent, _) = agent_with(ScriptedModel::new());
    let err = agent.generate("hi").await.unwrap_err();
    assert!(
        err.to_string().contains("no response queued for call #1"),
        "{err}"
    );
}

#[tokio::test]
async fn instructions_and_model_can_depend_on_the_request_context() {
    let cheap = Arc::new(
        ScriptedModel::new()
            .with_model_id("cheap")
            .respond(ScriptedResponse::text("from cheap")),
    );
    let premium = Arc::new(
        ScriptedModel::new()
            .with_model_id("premium")
            .respond(ScriptedResponse::text("from premium")),
    );
    let (c, p) = (cheap.clone(), premium.clone());
    let agent = Agent::builder("a")
        .instructions_fn(|ctx: RequestContext| async move {
            Ok(format!(
                "Answer in {}.",
                ctx.get_str("language").unwrap_or("English".into())
            ))
        })
        .model_fn(move |ctx: RequestContext| {
            let (c, p) = (c.clone(), p.clone());
            async move {
                Ok(if ctx.get_str("tier").as_deref() == Some("pro") {
                    ModelSpec::from(p as Arc<dyn kestrel_core::model::LanguageModel>)
                } else {
                    ModelSpec::from(c as Arc<dyn kestrel_core::model::LanguageModel>)
                })
            }
        })
        .build()
        .unwrap();
    let ctx = RequestContext::new();
    ctx.set("tier", "pro");
    ctx.set("language", "French");
    let result = agent.generate("hi").request_context(ctx).await.unwrap();
    assert_eq!(result.text, "from premium");
    let system = premium.requests()[0].messages[0].text();
    assert_eq!(system, "Answer in French.");
    let result = agent.generate("hi").await.unwrap();
    assert_eq!(result.text, "from cheap");
    assert_eq!(cheap.requests()[0].messages[0].text(), "Answer in English.");
}

#[tokio::test]
async fn text_stream_yields_only_text_and_keeps_the_result() {
    let (agent, _) =
        agent_with(ScriptedModel::new().respond(ScriptedResponse::text_deltas(["a", "b", "c"])));
    let mut text = agent.stream("hi").into_stream().text_stream();
    let mut out = Vec::new();
    while let Some(t) = text.next().await {
        out.push(t);
    }
    assert_eq!(out, ["a", "b", "c"]);
    assert_eq!(text.result().await.unwrap().text, "abc");
}

#[test]
fn bad_definitions_are_typed_errors() {
    let model = Arc::new(ScriptedModel::new());
    let t = || {
        create_tool("dup")
            .description("x")
            .input_schema(json!({"type": "object"}))
            .execute(|_: Value, _ctx| async move { Ok(1) })
    };
    let err = Agent::builder("a")
        .model(model.clone())
        .tool(t())
        .tool(t())
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AgentBuildError::Tool { source: ToolDefinitionError::DuplicateName { name }, .. } if name == "dup")
    );
    assert!(err.to_string().contains("duplicate tool name \"dup\""));

    let not_object = create_tool("s")
        .description("x")
        .input_schema(json!({"type": "string"}))
        .execute(|_: Value, _ctx| async move { Ok(1) });
    let err = Agent::builder("a")
        .model(model.clone())
        .tool(not_object)
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("must be an object schema"),
        "{err}"
    );

    let invalid = create_tool("s")
        .description("x")
        .input_schema(json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}}))
        .execute(|_: Value, _ctx| async move { Ok(1) });
    let err = Agent::builder("a")
        .model(model.clone())
        .tool(invalid)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            AgentBuildError::Tool {
                source: ToolDefinitionError::InvalidSchema { .. },
                ..
            }
        ),
        "{err}"
    );

    let bad_name = create_tool("has space")
        .description("x")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async move { Ok(1) });
    let err = Agent::builder("a")
        .model(model.clone())
        .tool(bad_name)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("invalid tool name"), "{err}");

    let err = Agent::builder("a")
        .model("no-slash")
        .registry(ModelRegistry::empty())
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        AgentBuildError::Model {
            source: UnknownModel::InvalidFormat { .. },
            ..
        }
    ));
    let err = Agent::builder("a")
        .model("mystery/x")
        .registry(ModelRegistry::empty())
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown model provider \"mystery\""),
        "{err}"
    );

    let err = Agent::builder("a")
        .model(model.clone())
        .max_steps(0)
        .build()
        .unwrap_err();
    assert!(matches!(err, AgentBuildError::ZeroMaxSteps { .. }));
}

#[test]
fn kestrel_finds_agents_by_id() {
    let model = Arc::new(ScriptedModel::new());
    let a = Agent::builder("alpha")
        .model(model.clone())
        .build()
        .unwrap();
    let b = Agent::builder("beta").model(model.clone()).build().unwrap();
    let k = Kestrel::builder()
        .agent(a.clone())
        .agent(b)
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    assert_eq!(k.agent("alpha").unwrap().id(), "alpha");
    assert_eq!(
        k.agents().map(|a| a.id()).collect::<Vec<_>>(),
        ["alpha", "beta"]
    );
    let err = k.agent("gamma").unwrap_err();
    assert_eq!(
        err,
        KestrelError::AgentNotFound {
            id: "gamma".into(),
            known: vec!["alpha".into(), "beta".into()]
        }
    );
    assert!(err.to_string().contains("registered agents: alpha, beta"));
    let err = Kestrel::builder()
        .agent(a.clone())
        .agent(a)
        .build()
        .unwrap_err();
    assert!(matches!(err, KestrelError::DuplicateAgent { .. }));
}

#[tokio::test]
async fn a_dropped_stream_does_not_stop_the_run() {
    let done = Arc::new(tokio::sync::Notify::new());
    let d2 = done.clone();
    let tool = create_tool("side_effect")
        .description("x")
        .input_schema(json!({"type": "object"}))
        .execute(move |_: Value, _ctx| {
            let done = d2.clone();
            async move {
                done.notify_one();
                Ok(json!("written"))
            }
        });
    let model = Arc::new(
        ScriptedModel::new()
            .respond(
                ScriptedResponse::tool_call("s1", "side_effect", json!({}))
                    .with_delay(Duration::from_millis(20)),
            )
            .respond(ScriptedResponse::text("after the reader left")),
    );
    let agent = Agent::builder("a")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    let mut stream = agent.stream("go").into_stream();
    let first = stream.next_event().await.unwrap();
    assert_eq!(first.type_name(), "start");
    drop(stream);
    tokio::time::timeout(Duration::from_secs(5), done.notified())
        .await
        .expect("the tool ran after the stream was dropped");
    for _ in 0..100 {
        if model.calls() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(model.calls(), 2, "the run went on to its final step");
}

/// A model that calls `tool` with `args` until a tool result is back, then answers `text`.
fn call_then_answer(tool: &'static str, args: Value, text: &'static str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |req| {
        let results = req
            .messages
            .iter()
            .any(|m| m.role == kestrel_core::message::Role::Tool);
        if results {
            ScriptedResponse::text(text)
        } else {
            ScriptedResponse::tool_call("c1", tool, args.clone())
        }
    }))
}

/// Issue 15, bug 4: a sub-agent of a registered agent runs in the instance: its delegated run
/// is counted by `runs_in_progress` and reached by `Kestrel::abort_run`.
#[tokio::test]
async fn a_delegated_run_is_a_run_of_the_instance() {
    let started = Arc::new(tokio::sync::Notify::new());
    let child_run = Arc::new(std::sync::Mutex::new(String::new()));
    let (s, c) = (started.clone(), child_run.clone());
    let wait = create_tool("wait")
        .description("Waits until aborted")
        .input_schema(json!({"type": "object"}))
        .execute(move |_: Value, ctx: ToolContext| {
            let (started, child_run) = (s.clone(), c.clone());
            async move {
                *child_run.lock().unwrap() = ctx.run_id().to_string();
                started.notify_one();
                ctx.abort_signal().aborted().await;
                Ok(json!("stopped"))
            }
        });
    let helper = Agent::builder("helper")
        .description("Helps")
        .model(call_then_answer("wait", json!({}), "helped"))
        .tool(wait)
        .build()
        .unwrap();
    let boss = Agent::builder("boss")
        .model(call_then_answer(
            "agent-helper",
            json!({"prompt": "help"}),
            "done",
        ))
        .agents([helper])
        .build()
        .unwrap();
    let k = Kestrel::builder()
        .agent(boss)
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    let stream = k.agent("boss").unwrap().stream("go").into_stream();
    let parent = stream.run_id().to_string();
    let run = tokio::spawn(stream.result());
    started.notified().await;
    assert_eq!(k.runs_in_progress(), 2, "the parent and its delegated run");
    let child = child_run.lock().unwrap().clone();
    assert_ne!(child, parent);
    assert!(
        k.abort_run(&child),
        "the instance reaches the delegated run"
    );
    let result = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap();
    // The parent goes on (its delegation came back aborted) or ends; either way nothing hangs.
    drop(result);
    assert!(k.abort_run(&parent) || k.runs_in_progress() == 0);
}
