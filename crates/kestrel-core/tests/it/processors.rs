//! Processors: each of Mastra's hooks on a real run, the tripwire on every path of an agent
//! (generate, stream, a tool's result, a provider error, a delegated sub-agent, a run
//! continued after a decision), retries with feedback, and the hold-back that keeps text a
//! guardrail rejects off the stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use kestrel_core::agent::{Agent, AgentError};
use kestrel_core::event::{Event, EventKind};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{
    FinishReason, ModelError, ModelEvent, ModelRequest, ScriptedModel, ScriptedResponse, ToolChoice,
};
use kestrel_core::processor::{
    ApiErrorArgs, InputArgs, InputStepArgs, OutputResultArgs, OutputStepArgs, OutputStreamArgs,
    Phases, Processor, ProcessorError, ProcessorPhase, ToolResultArgs,
};
use kestrel_core::tool::create_tool;
use kestrel_core::trace::{SpanType, TraceQuery, TracingConfig};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

/// Every text the stream carried, joined.
fn streamed_text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect()
}

fn tripwire_of(events: &[Event]) -> &kestrel_core::processor::Tripwire {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Tripwire(t) => Some(t),
            _ => None,
        })
        .expect("a tripwire event")
}

fn finish_reason_of(events: &[Event]) -> FinishReason {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Finish(f) => Some(f.step_result.reason),
            _ => None,
        })
        .expect("a finish event")
}

/// Blocks inputs that mention `word`, with metadata.
struct BlockWord(&'static str);

#[async_trait]
impl Processor for BlockWord {
    fn id(&self) -> &str {
        "block-word"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::Input.into()
    }

    async fn process_input(&self, args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
        if args.messages.iter().any(|m| m.text().contains(self.0)) {
            return Err(
                ProcessorError::abort(format!("the input mentions {:?}", self.0))
                    .with_metadata(json!({"word": self.0})),
            );
        }
        Ok(())
    }
}

#[tokio::test]
async fn an_input_tripwire_stops_generate_and_stream_before_the_model_is_called() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("never")));
    let agent = Agent::builder("guarded")
        .model(model.clone())
        .input_processor(BlockWord("password"))
        .build()
        .unwrap();

    let error = agent.generate("my password is hunter2").await.unwrap_err();
    let AgentError::Tripwire { tripwire, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(tripwire.reason, "the input mentions \"password\"");
    assert_eq!(tripwire.processor_id.as_deref(), Some("block-word"));
    assert_eq!(tripwire.metadata, Some(json!({"word": "password"})));
    assert_eq!(error.kind(), "tripwire");
    assert_eq!(model.calls(), 0, "the model never saw the input");

    let (events, result) = agent
        .stream("my password is hunter2")
        .into_stream()
        .collect()
        .await;
    assert!(result.unwrap_err().tripwire().is_some());
    assert_eq!(kinds(&events), ["start", "tripwire", "finish"]);
    assert_eq!(finish_reason_of(&events), FinishReason::Tripwire);
    // Mastra's wire form.
    let wire = serde_json::to_value(&events[1]).unwrap();
    assert_eq!(wire["type"], "tripwire");
    assert_eq!(
        wire["payload"],
        json!({"reason": "the input mentions \"password\"", "metadata": {"word": "password"}, "processorId": "block-word"})
    );
    assert_eq!(model.calls(), 0);

    // A clean input goes through.
    assert_eq!(agent.generate("hello").await.unwrap().text, "never");
}

/// Rewrites the input and, per step, the system text, tools and tool choice.
struct Rewriter;

#[async_trait]
impl Processor for Rewriter {
    fn id(&self) -> &str {
        "rewriter"
    }

    async fn process_input(&self, args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
        for message in args.messages.iter_mut() {
            for part in &mut message.parts {
                if let Part::Text { text } = part {
                    *text = text.replace("colour", "color");
                }
            }
        }
        args.cx
            .decide("normalize", Some(json!({"rule": "spelling"})));
        Ok(())
    }

    async fn process_input_step(&self, args: &mut InputStepArgs<'_>) -> Result<(), ProcessorError> {
        args.system.push(format!("step {}", args.step));
        args.tools.retain(|t| t.name != "hidden");
        *args.tool_choice = ToolChoice::None;
        Ok(())
    }
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[tokio::test]
async fn input_hooks_change_what_the_model_is_sent_and_report_their_decisions() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("ok")));
    let hidden = create_tool("hidden")
        .description("Not for the model")
        .execute(|_: Nothing, _ctx| async move { Ok(json!({})) });
    let shown = create_tool("shown")
        .description("For the model")
        .execute(|_: Nothing, _ctx| async move { Ok(json!({})) });
    let agent = Agent::builder("rewritten")
        .instructions("Be brief.")
        .model(model.clone())
        .tool(hidden)
        .tool(shown)
        .input_processor(Rewriter)
        .build()
        .unwrap();
    let (events, result) = agent
        .stream("what colour is it")
        .into_stream()
        .collect()
        .await;
    let result = result.unwrap();
    let request: ModelRequest = model.requests().remove(0);
    let texts: Vec<(Role, String)> = request
        .messages
        .iter()
        .map(|m| (m.role, m.text()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::System, "Be brief.".to_owned()),
            (Role::System, "step 0".to_owned()),
            (Role::User, "what color is it".to_owned()),
        ]
    );
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["shown"]);
    assert_eq!(request.tool_choice, ToolChoice::None);
    // The input change is the run's; the step's system text was that call's alone.
    assert_eq!(result.text, "ok");
    let decision = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ProcessorDecision(d) => Some(d),
            _ => None,
        })
        .unwrap();
    assert_eq!(decision.processor_id, "rewriter");
    assert_eq!(decision.phase, ProcessorPhase::Input);
    assert_eq!(decision.action, "normalize");
    let wire = serde_json::to_value(
        events
            .iter()
            .find(|e| e.kind.type_name() == "processor-decision")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        wire["payload"],
        json!({"processorId": "rewriter", "phase": "input", "action": "normalize", "detail": {"rule": "spelling"}})
    );
}

/// Rejects answers holding a secret; redacts e-mail addresses.
struct SecretGuard {
    steps: AtomicUsize,
}

#[async_trait]
impl Processor for SecretGuard {
    fn id(&self) -> &str {
        "secret-guard"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::OutputStep.into()
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        self.steps.fetch_add(1, Ordering::SeqCst);
        if args.text.contains("sk-live-") {
            return Err(ProcessorError::abort("the answer holds an API key"));
        }
        if args.text.contains("@example.com") {
            *args.text = args.text.replace("bob@example.com", "[email]");
            args.cx.decide("redact", Some(json!({"kind": "email"})));
        }
        Ok(())
    }
}

fn guard() -> SecretGuard {
    SecretGuard {
        steps: AtomicUsize::new(0),
    }
}

#[tokio::test]
async fn a_rejected_answer_is_never_streamed_and_the_run_ends_with_a_tripwire() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text_deltas([
        "Your key is ",
        "sk-live-",
        "abc123",
    ])));
    let agent = Agent::builder("leaky")
        .model(model)
        .output_processor(guard())
        .build()
        .unwrap();
    let (events, result) = agent.stream("what is my key").into_stream().collect().await;
    let error = result.unwrap_err();
    assert_eq!(
        error.tripwire().unwrap().processor_id.as_deref(),
        Some("secret-guard")
    );
    assert_eq!(
        kinds(&events),
        ["start", "step-start", "tripwire", "finish"],
        "no part of the rejected answer reached the stream"
    );
    assert!(!serde_json::to_string(&events).unwrap().contains("sk-live"));
    assert_eq!(finish_reason_of(&events), FinishReason::Tripwire);
    assert_eq!(tripwire_of(&events).reason, "the answer holds an API key");
}

#[tokio::test]
async fn a_changed_answer_streams_as_changed() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text_deltas([
        "Write to bob",
        "@example.com",
        " today.",
    ])));
    let agent = Agent::builder("redacting")
        .model(model)
        .output_processor(guard())
        .build()
        .unwrap();
    let (events, result) = agent.stream("who").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.text, "Write to [email] today.");
    assert_eq!(streamed_text(&events), "Write to [email] today.");
    assert_eq!(
        kinds(&events),
        [
            "start",
            "step-start",
            "processor-decision",
            "text-start",
            "text-delta",
            "text-end",
            "step-finish",
            "finish"
        ]
    );
    // The conversation keeps the changed text too.
    assert_eq!(
        result.response_messages[0].text(),
        "Write to [email] today."
    );

    // An unchanged answer keeps its deltas.
    let model =
        Arc::new(ScriptedModel::new().respond(ScriptedResponse::text_deltas(["a", "b", "c"])));
    let agent = Agent::builder("clean")
        .model(model)
        .output_processor(guard())
        .build()
        .unwrap();
    let (events, _) = agent.stream("x").into_stream().collect().await;
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "text-delta")
            .count(),
        3
    );
}

/// Sends an answer back once for a retry, accepts the next.
struct Picky;

#[async_trait]
impl Processor for Picky {
    fn id(&self) -> &str {
        "picky"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::OutputStep.into()
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        if args.text.contains("rude") {
            return Err(ProcessorError::retry("be polite"));
        }
        Ok(())
    }
}

fn polite_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        let feedback = req
            .messages
            .iter()
            .any(|m| m.text().starts_with("[Processor Feedback]"));
        if feedback {
            ScriptedResponse::text("Hello, dear user.")
        } else {
            ScriptedResponse::text("a rude answer")
        }
    }))
}

#[tokio::test]
async fn a_retry_asks_the_model_again_with_mastras_feedback() {
    let model = polite_model();
    let agent = Agent::builder("polite")
        .model(model.clone())
        .output_processor(Picky)
        .max_processor_retries(2)
        .build()
        .unwrap();
    let (events, result) = agent.stream("hi").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.text, "Hello, dear user.");
    assert_eq!(result.steps.len(), 1, "the rejected answer is not a step");
    assert_eq!(model.calls(), 2);
    let second = model.requests().remove(1);
    let last = second.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert_eq!(
        last.text(),
        "[Processor Feedback] Your previous response was not accepted: be polite. Please try \
         again with the feedback in mind."
    );
    assert!(
        !second
            .messages
            .iter()
            .any(|m| m.text().contains("rude answer")),
        "the rejected answer is rolled back"
    );
    assert_eq!(
        kinds(&events),
        [
            "start",
            "step-start",
            "step-finish",
            "step-start",
            "text-start",
            "text-delta",
            "text-end",
            "step-finish",
            "finish"
        ]
    );
    let EventKind::StepFinish(retried) = &events[2].kind else {
        panic!()
    };
    assert_eq!(retried.step_result.reason, FinishReason::Retry);
    assert!(!streamed_text(&events).contains("rude"));
}

#[tokio::test]
async fn without_retries_left_a_retry_is_a_tripwire_that_says_so() {
    let model = Arc::new(ScriptedModel::from_fn(|_| ScriptedResponse::text("rude")));
    let agent = Agent::builder("strict")
        .model(model.clone())
        .output_processor(Picky)
        .build()
        .unwrap();
    let error = agent.generate("hi").await.unwrap_err();
    let tripwire = error.tripwire().unwrap();
    assert!(tripwire.retry);
    assert_eq!(tripwire.reason, "be polite");
    assert_eq!(model.calls(), 1);

    // With one retry, the second rude answer ends it.
    let agent = Agent::builder("strict-once")
        .model(model.clone())
        .output_processor(Picky)
        .max_processor_retries(1)
        .build()
        .unwrap();
    assert!(agent.generate("hi").await.unwrap_err().tripwire().is_some());
    assert_eq!(model.calls(), 3);
}

/// Upper-cases every streamed text part, drops reasoning, and stops at "STOP".
struct Shouter;

#[async_trait]
impl Processor for Shouter {
    fn id(&self) -> &str {
        "shouter"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::OutputStream.into()
    }

    async fn process_output_stream(
        &self,
        args: &mut OutputStreamArgs<'_>,
    ) -> Result<(), ProcessorError> {
        let seen: &mut usize = args.state.get_or_default();
        *seen += 1;
        match args.part.take() {
            Some(ModelEvent::TextDelta { text }) => {
                if text.contains("stop") {
                    return Err(ProcessorError::abort(format!("stopped after {seen} parts")));
                }
                *args.part = Some(ModelEvent::TextDelta {
                    text: text.to_uppercase(),
                });
            }
            Some(ModelEvent::ReasoningDelta { .. }) => {}
            other => *args.part = other,
        }
        Ok(())
    }
}

#[tokio::test]
async fn stream_hooks_change_and_drop_parts_and_can_stop_the_stream() {
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text_deltas(["quiet ", "words"]).and_reasoning("hmm"))
            .respond(ScriptedResponse::text_deltas(["go ", "stop ", "now"])),
    );
    let agent = Agent::builder("loud")
        .model(model)
        .output_processor(Shouter)
        .build()
        .unwrap();
    let (events, result) = agent.stream("x").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.text, "QUIET WORDS");
    assert_eq!(result.steps[0].reasoning, "");
    assert_eq!(streamed_text(&events), "QUIET WORDS");
    assert!(!kinds(&events).contains(&"reasoning-delta"));

    let (events, result) = agent.stream("y").into_stream().collect().await;
    assert_eq!(
        result.unwrap_err().tripwire().unwrap().reason,
        "stopped after 2 parts",
        "the state lasts the step"
    );
    assert_eq!(
        streamed_text(&events),
        "",
        "held parts of a stopped step are dropped"
    );
}

/// Counts output results and appends a signature to the final answer.
struct Signer {
    results: AtomicUsize,
}

#[async_trait]
impl Processor for Signer {
    fn id(&self) -> &str {
        "signer"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::OutputResult.into()
    }

    async fn process_output_result(
        &self,
        args: &mut OutputResultArgs<'_>,
    ) -> Result<(), ProcessorError> {
        self.results.fetch_add(1, Ordering::SeqCst);
        assert_eq!(args.steps.len(), 1, "the tool step came before");
        assert!(args.usage.total_tokens > 0);
        args.text.push_str(" — the bot");
        Ok(())
    }
}

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

fn weather_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        let results = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        if results == 0 {
            ScriptedResponse::tool_call("w1", "get_weather", json!({"city": "Oslo"}))
        } else {
            let last = req.messages.last().unwrap();
            let Part::ToolResult { result, .. } = &last.parts[0] else {
                panic!()
            };
            ScriptedResponse::text(format!("It is {}", result["sky"].as_str().unwrap_or("?")))
        }
    }))
}

fn weather_tool() -> impl kestrel_core::tool::Tool {
    create_tool("get_weather")
        .description("The weather")
        .execute(|c: City, _ctx| async move {
            Ok(json!({"city": c.city, "sky": "clear", "token": "sk-live-123"}))
        })
}

#[tokio::test]
async fn the_result_hook_sees_only_the_answer_that_ends_the_run() {
    let signer = Arc::new(Signer {
        results: AtomicUsize::new(0),
    });
    let agent = Agent::builder("signed")
        .model(weather_model())
        .tool(weather_tool())
        .output_processor(signer.clone() as Arc<dyn Processor>)
        .build()
        .unwrap();
    let (events, result) = agent.stream("weather?").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.text, "It is clear — the bot");
    assert_eq!(streamed_text(&events), "It is clear — the bot");
    assert_eq!(signer.results.load(Ordering::SeqCst), 1);
}

/// Removes secrets from tool results; stops the run on a forbidden city.
struct ResultScrubber;

#[async_trait]
impl Processor for ResultScrubber {
    fn id(&self) -> &str {
        "result-scrubber"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::ToolResult.into()
    }

    async fn process_tool_result(
        &self,
        args: &mut ToolResultArgs<'_>,
    ) -> Result<(), ProcessorError> {
        assert_eq!(args.tool_name, "get_weather");
        if args.args["city"] == "Atlantis" {
            return Err(ProcessorError::abort("no such place"));
        }
        if let Some(map) = args.result.as_object_mut() {
            map.remove("token");
        }
        Ok(())
    }
}

#[tokio::test]
async fn tool_results_are_processed_before_they_are_streamed_or_read() {
    let model = weather_model();
    let agent = Agent::builder("scrubbed")
        .model(model.clone())
        .tool(weather_tool())
        .output_processor(ResultScrubber)
        .build()
        .unwrap();
    let (events, result) = agent.stream("weather?").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.text, "It is clear");
    assert_eq!(
        result.tool_results[0].result,
        json!({"city": "Oslo", "sky": "clear"})
    );
    assert!(!serde_json::to_string(&events).unwrap().contains("sk-live"));
    let seen = model.requests().remove(1);
    assert!(
        !serde_json::to_string(&seen.messages[..])
            .unwrap()
            .contains("sk-live")
    );

    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::tool_call(
        "w1",
        "get_weather",
        json!({"city": "Atlantis"}),
    )));
    let agent = Agent::builder("scrubbed-2")
        .model(model.clone())
        .tool(weather_tool())
        .output_processor(ResultScrubber)
        .build()
        .unwrap();
    let (events, result) = agent.stream("weather?").into_stream().collect().await;
    assert_eq!(
        result.unwrap_err().tripwire().unwrap().reason,
        "no such place"
    );
    let names = kinds(&events);
    assert!(!names.contains(&"tool-result"), "{names:?}");
    assert_eq!(&names[names.len() - 2..], ["tripwire", "finish"]);
    assert_eq!(model.calls(), 1);
}

/// Retries a model call that failed with a rate limit, blocks one that failed otherwise.
struct Retrier;

#[async_trait]
impl Processor for Retrier {
    fn id(&self) -> &str {
        "retrier"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::ApiError.into()
    }

    async fn process_api_error(&self, args: &mut ApiErrorArgs<'_>) -> Result<(), ProcessorError> {
        match args.error {
            ModelError::RateLimited { .. } => args.retry = true,
            ModelError::BadRequest { .. } => {
                return Err(ProcessorError::abort("the provider refused the request"));
            }
            _ => {}
        }
        Ok(())
    }
}

fn http_error(status: u16) -> ModelError {
    if status == 429 {
        ModelError::RateLimited {
            provider: "scripted".into(),
            attempts: 3,
            retry_after: None,
            message: "slow down".into(),
        }
    } else {
        ModelError::BadRequest {
            provider: "scripted".into(),
            status,
            message: "no".into(),
        }
    }
}

#[tokio::test]
async fn the_api_error_hook_retries_a_failed_call_or_stops_the_run() {
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::error(http_error(429)))
            .respond(ScriptedResponse::text("second time lucky")),
    );
    let agent = Agent::builder("retrying")
        .model(model.clone())
        .output_processor(Retrier)
        .max_processor_retries(1)
        .build()
        .unwrap();
    let (events, result) = agent.stream("x").into_stream().collect().await;
    assert_eq!(result.unwrap().text, "second time lucky");
    assert_eq!(model.calls(), 2);
    assert!(kinds(&events).contains(&"step-finish"));

    // Out of retries: the model's error.
    model.push(ScriptedResponse::error(http_error(429)));
    model.push(ScriptedResponse::error(http_error(429)));
    let error = agent.generate("x").await.unwrap_err();
    assert!(matches!(error, AgentError::Model { .. }), "{error:?}");

    model.push(ScriptedResponse::error(http_error(400)));
    let error = agent.generate("x").await.unwrap_err();
    assert_eq!(
        error.tripwire().unwrap().reason,
        "the provider refused the request"
    );
}

/// A processor that cannot check.
struct Broken;

#[async_trait]
impl Processor for Broken {
    fn id(&self) -> &str {
        "broken"
    }

    async fn process_output_step(
        &self,
        _args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        Err(ProcessorError::failed("the judge is unreachable"))
    }
}

#[tokio::test]
async fn a_failing_processor_fails_the_run_closed() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("unchecked")));
    let agent = Agent::builder("closed")
        .model(model)
        .output_processor(Broken)
        .build()
        .unwrap();
    let (events, result) = agent.stream("x").into_stream().collect().await;
    let error = result.unwrap_err();
    let AgentError::Processor { source, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(source.processor_id, "broken");
    assert_eq!(source.phase, ProcessorPhase::OutputStep);
    assert_eq!(error.kind(), "processor");
    assert!(!streamed_text(&events).contains("unchecked"));
    assert_eq!(kinds(&events).last(), Some(&"error"));
}

#[tokio::test]
async fn a_sub_agents_tripwire_stops_the_delegating_run() {
    let sub_model =
        Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("here is sk-live-999")));
    let sub = Agent::builder("helper")
        .description("Helps")
        .model(sub_model)
        .output_processor(guard())
        .build()
        .unwrap();
    let parent_model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "d1",
                "agent-helper",
                json!({"prompt": "find the key"}),
            ))
            .respond(ScriptedResponse::text("never")),
    );
    let parent = Agent::builder("boss")
        .model(parent_model.clone())
        .agents([sub])
        .build()
        .unwrap();
    let (events, result) = parent
        .stream("get me the key")
        .into_stream()
        .collect()
        .await;
    let error = result.unwrap_err();
    let tripwire = error.tripwire().unwrap();
    assert_eq!(tripwire.processor_id.as_deref(), Some("secret-guard"));
    assert_eq!(error.run_id(), events[0].run_id.as_ref());
    assert_eq!(
        parent_model.calls(),
        1,
        "the parent's model never read past it"
    );
    assert_eq!(finish_reason_of(&events), FinishReason::Tripwire);
    assert!(!serde_json::to_string(&events).unwrap().contains("sk-live"));
}

#[tokio::test]
async fn a_run_continued_after_approval_meets_its_processors() {
    let model = weather_model();
    let tool = create_tool("get_weather")
        .description("The weather")
        .require_approval(true)
        .execute(|c: City, _ctx| async move {
            Ok(json!({"city": c.city, "sky": "clear", "token": "sk-live-123"}))
        });
    let agent = Agent::builder("approved")
        .model(model)
        .tool(tool)
        .output_processor(ResultScrubber)
        .output_processor(guard())
        .build()
        .unwrap();
    let stopped = agent.generate("weather?").await.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let (events, done) = agent
        .run(&stopped.run_id)
        .approve("w1")
        .stream()
        .await
        .unwrap()
        .collect()
        .await;
    let done = done.unwrap();
    assert_eq!(done.text, "It is clear");
    assert!(!serde_json::to_string(&events).unwrap().contains("sk-live"));
}

#[tokio::test]
async fn processor_runs_are_spans_and_a_tripwire_fails_the_runs_span() {
    let model =
        Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("the key is sk-live-1")));
    let agent = Agent::builder("traced")
        .model(model)
        .input_processor(Rewriter)
        .output_processor(guard())
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .tracing(TracingConfig::new())
        .agent(agent)
        .build()
        .unwrap();
    let error = kestrel
        .agent("traced")
        .unwrap()
        .generate("hi")
        .await
        .unwrap_err();
    assert!(error.tripwire().is_some());
    kestrel.tracer().unwrap().flush().await;
    let store = kestrel.span_store().unwrap();
    let listed = store.list_traces(&TraceQuery::default()).await.unwrap();
    assert_eq!(listed.total, 1);
    let spans = store.trace(&listed.traces[0].root.trace_id).await.unwrap();
    let processors: Vec<(&str, Value)> = spans
        .iter()
        .filter(|s| s.span_type == SpanType::ProcessorRun)
        .map(|s| (s.name.as_str(), s.attributes["phase"].clone()))
        .collect();
    assert_eq!(
        processors,
        [
            ("processor: 'rewriter'", json!("input")),
            ("processor: 'rewriter'", json!("inputStep")),
            ("processor: 'secret-guard'", json!("outputStep")),
        ]
    );
    let blocked = spans
        .iter()
        .find(|s| s.name == "processor: 'secret-guard'")
        .unwrap();
    assert!(blocked.error.is_some());
    assert_eq!(
        blocked.attributes["tripwire"]["reason"],
        "the answer holds an API key"
    );
    let root = &listed.traces[0].root;
    assert!(root.error.is_some(), "a blocked run is not a success");
    assert_eq!(
        root.attributes["tripwire"]["processorId"],
        json!("secret-guard")
    );
    let decided = spans
        .iter()
        .find(|s| s.name == "processor: 'rewriter'")
        .unwrap();
    assert_eq!(decided.attributes["decisions"][0]["action"], "normalize");
}

#[test]
fn phases_have_mastras_names() {
    let names: Vec<&str> = ProcessorPhase::ALL.iter().map(|p| p.as_str()).collect();
    assert_eq!(
        names,
        [
            "input",
            "inputStep",
            "outputStream",
            "outputStep",
            "outputResult",
            "toolResult",
            "apiError"
        ]
    );
    for phase in ProcessorPhase::ALL {
        assert_eq!(ProcessorPhase::parse(phase.as_str()), Some(phase));
        assert_eq!(serde_json::to_value(phase).unwrap(), json!(phase.as_str()));
    }
    let set = Phases::of(&[ProcessorPhase::Input, ProcessorPhase::ToolResult]);
    assert_eq!(
        set.iter().collect::<Vec<_>>(),
        [ProcessorPhase::Input, ProcessorPhase::ToolResult]
    );
    let _ = Message::user("x");
}

mod workflows;
