//! An agent as a workflow step: `topic` becomes a prompt, the `writer` agent answers it, and
//! `headline` frames the answer. The agent's events stream through the workflow's stream as
//! `workflow-step-output`, so a UI shows the text as it is written.
//!
//! `cargo run -p kestrel --example workflow_agent`
//!
//! Without configuration a scripted model plays the LLM, so the example runs the same
//! everywhere; with `KESTREL_MODEL` set (say `openai/gpt-5-mini` and `OPENAI_API_KEY`) the
//! agent runs on that model.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::agent::AgentStep;
use kestrel::event::EventKind;
use kestrel::model::ModelSpec;
use kestrel::prelude::*;
use kestrel::workflow::{Workflow, WorkflowStatus, create_step};
use serde_json::{Value, json};

fn model() -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text_deltas(["Kestrels ", "hover ", "into ", "the ", "wind."])
        }))),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let writer = Agent::builder("writer")
        .description("Writes one sentence on a topic")
        .instructions("Write one vivid sentence on the topic you are given.")
        .model(model())
        .build()?;
    let headline = create_step("headline").execute(|answer: Value, ctx| async move {
        let topic = ctx.init_data()["topic"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(json!({
            "headline": topic.to_uppercase(),
            "body": answer["text"],
        }))
    });
    let workflow = Workflow::builder("story")
        // `{topic}` in, the agent step's `{prompt}` out.
        .map(|input, _ctx| async move {
            Ok(json!({"prompt": format!("Topic: {}", input["topic"].as_str().unwrap_or_default())}))
        })
        .then(AgentStep::new(writer))
        .then(headline)
        .commit()?;

    let mut stream = workflow
        .create_run()
        .stream(json!({"topic": "kestrels"}))
        .await?;
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::WorkflowStepStart(step) if step.id == "writer" => print!("writer: "),
            // The agent's own events, passed through the workflow's stream.
            EventKind::WorkflowStepOutput(output) if output.output["type"] == "text-delta" => {
                print!(
                    "{}",
                    output.output["payload"]["text"]
                        .as_str()
                        .unwrap_or_default()
                );
            }
            EventKind::WorkflowStepResult(step) if step.id == "writer" => println!(),
            EventKind::WorkflowStepResult(step) => {
                println!("step {} → {:?}", step.id, step.status);
            }
            EventKind::WorkflowFinish(finish) => {
                println!("run: {:?}", finish.workflow_status);
                assert_eq!(finish.workflow_status, WorkflowStatus::Success);
                let result = finish.final_workflow_result.clone().unwrap_or_default();
                println!(
                    "{}: {}",
                    result["headline"].as_str().unwrap_or_default(),
                    result["body"].as_str().unwrap_or_default()
                );
            }
            _ => {}
        }
    }
    Ok(())
}
