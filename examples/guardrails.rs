//! Guardrails: processors that check what goes into an agent's model and what comes out.
//!
//! 1. Input: the unicode normalizer, then the PII detector's local pass — the model (and the
//!    thread) only ever see `[EMAIL]`.
//! 2. Output: the regex filter's secrets preset blocks an answer holding an API key. The
//!    stream holds each answer until the guardrail accepted it, so the key never reaches the
//!    client: the run ends with a `tripwire` event, and `generate` returns
//!    `AgentError::Tripwire`.
//! 3. A processor of your own that asks the model to try again (`ProcessorError::retry`),
//!    within the agent's `max_processor_retries`.
//!
//! ```sh
//! cargo run -p kestrel --example guardrails --features processors
//! ```

use std::sync::Arc;

use kestrel::agent::{Agent, AgentError};
use kestrel::event::EventKind;
use kestrel::model::{ScriptedModel, ScriptedResponse};
use kestrel::processor::{OutputStepArgs, Phases, Processor, ProcessorError, ProcessorPhase};
use kestrel::processors::{FilterStrategy, PiiDetector, Preset, RegexFilter, UnicodeNormalizer};

/// Sends answers that shout back for another try.
struct NoShouting;

#[async_trait::async_trait]
impl Processor for NoShouting {
    fn id(&self) -> &str {
        "no-shouting"
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::OutputStep.into()
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        if args.text.len() > 3 && *args.text == args.text.to_uppercase() {
            return Err(ProcessorError::retry("answer without capitals"));
        }
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The scripted model stands in for a real one: it answers the first question with what
    // it read, and the second with a leaked key.
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let asked = req.messages.last().map(|m| m.text()).unwrap_or_default();
        if asked.contains("key") {
            ScriptedResponse::text_deltas(["Sure: ", "sk-proj-", "abcdefghijklmnopqrstuvwxyz0123"])
        } else {
            ScriptedResponse::text(format!("I read: {asked}"))
        }
    }));
    let agent = Agent::builder("support")
        .instructions("You help customers.")
        .model(model)
        .input_processor(UnicodeNormalizer::new())
        .input_processor(PiiDetector::new())
        .output_processor(
            RegexFilter::new()
                .preset(Preset::Secrets)
                .strategy(FilterStrategy::Block),
        )
        .build()?;

    // 1. Personal data is redacted before the model sees it.
    let answer = agent
        .generate("Please write to ａｄａ@example.com about my order.")
        .await?;
    println!("1. {}", answer.text);
    assert_eq!(
        answer.text,
        "I read: Please write to [EMAIL] about my order."
    );

    // 2. A blocked answer: the stream carries a tripwire, never the key.
    let (events, outcome) = agent
        .stream("What is the admin API key?")
        .into_stream()
        .collect()
        .await;
    for event in &events {
        if let EventKind::Tripwire(tripwire) = &event.kind {
            println!(
                "2. blocked by {}: {}",
                tripwire.processor_id.as_deref().unwrap_or("?"),
                tripwire.reason
            );
        }
    }
    assert!(!serde_json::to_string(&events)?.contains("sk-proj"));
    match outcome {
        Err(AgentError::Tripwire { tripwire, .. }) => {
            assert_eq!(tripwire.reason, "the answer matched openai-api-key");
        }
        other => return Err(format!("expected a tripwire, got {other:?}").into()),
    }

    // 3. A retry with feedback: the first answer shouts, the second does not.
    let shouty = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("HELLO THERE"))
            .respond(ScriptedResponse::text("Hello there.")),
    );
    let polite = Agent::builder("polite")
        .model(shouty.clone())
        .output_processor(NoShouting)
        .max_processor_retries(1)
        .build()?;
    let answer = polite.generate("Greet me").await?;
    println!("3. {} (after {} model calls)", answer.text, shouty.calls());
    assert_eq!(answer.text, "Hello there.");
    Ok(())
}
