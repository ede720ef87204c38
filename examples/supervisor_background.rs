//! Background sub-agents: a delegation answers at once while the sub-agent works on, and its
//! result reaches the supervisor in a later step.
//!
//! `cargo run -p kestrel --example supervisor_background`
//!
//! Scripted models play the LLMs unless `KESTREL_MODEL` is set (then every agent runs on it).
//!
//! The supervisor lists both sub-agents in `background_tasks` (each with a 15-minute timeout);
//! the `Kestrel` instance caps how many background tasks run at once. A delegation then
//! returns "working on it in the background" at once, with a `background-task-started` event,
//! and the supervisor can talk to the user meanwhile. When the sub-agent finishes, a
//! `background-task-completed` event reports it and its result enters the conversation. With
//! `until_idle(true)` (Mastra's `streamUntilIdle`) the stream stays open until every task has
//! finished and the supervisor has answered its result.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel::agent::{BackgroundTasks, BackgroundTool};
use kestrel::model::{ModelRequest, ModelSpec};
use kestrel::prelude::*;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// The model of an agent: the configured one, or `script` when none is.
fn model_or(script: ScriptedModel) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script)),
    }
}

/// The background reports the model has read: `[background task ...] finished` messages.
fn reports(req: &ModelRequest) -> Vec<String> {
    (req.messages.iter().map(Message::text))
        .filter(|text| text.starts_with("[background task"))
        .collect()
}

/// A sub-agent that takes a while to answer.
fn slow_agent(id: &str, description: &str, answer: &'static str) -> Result<Agent, Error> {
    let script = ScriptedModel::from_fn(move |_| {
        ScriptedResponse::text(answer).with_delay(Duration::from_millis(300))
    });
    Ok(Agent::builder(id)
        .description(description)
        .model(model_or(script))
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let research = slow_agent(
        "research",
        "Gathers facts and returns bullet points.",
        "- AI tutors give instant feedback\n- Teachers save time on grading",
    )?;
    let writing = slow_agent(
        "writing",
        "Turns research into a short article.",
        "AI in education: tutors that answer at once, and teachers with more time to teach.",
    )?;
    // Research first; once its report is in, writing; once that is in, the article. While a
    // task runs, the supervisor tells the user so.
    let script = ScriptedModel::from_fn(|req| {
        let calls = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        let reports = reports(req);
        match (calls, reports.len()) {
            (0, _) => ScriptedResponse::tool_call(
                "d1",
                "agent-research",
                json!({"prompt": "AI in education"}),
            ),
            (1, 0) | (2, 1) => ScriptedResponse::text("Working on it; I will report back."),
            (1, _) => ScriptedResponse::tool_call(
                "d2",
                "agent-writing",
                json!({"prompt": format!("Write an article from:\n{}", reports[0])}),
            ),
            _ => {
                let article = reports.last().and_then(|r| r.split_once('\n')).map(|r| r.1);
                ScriptedResponse::text(format!("Here is your article: {}", article.unwrap_or("")))
            }
        }
    });
    let supervisor = Agent::builder("supervisor")
        .instructions("Coordinate research and writing using the available agents.")
        .model(model_or(script))
        .agents([research, writing])
        .background_tasks(
            BackgroundTasks::new()
                .tool("research", BackgroundTool::enabled().timeout_ms(900_000))
                .tool("writing", BackgroundTool::enabled().timeout_ms(900_000)),
        )
        .max_steps(10)
        .build()?;
    // The instance's background task manager: at most two sub-agents at once, across runs.
    let kestrel = Kestrel::builder()
        .background_concurrency(2)
        .agent(supervisor)
        .build()?;

    let supervisor = kestrel.agent("supervisor")?;
    let options = RunOptions::new().until_idle(true);
    let mut stream = supervisor
        .stream("Research AI in education and write an article")
        .options(options)
        .into_stream();
    let (mut started, mut completed) = (0, 0);
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::BackgroundTaskStarted(task) => {
                started += 1;
                println!(
                    "background-task-started: {} (task {})",
                    task.tool_name, task.task_id
                );
            }
            EventKind::BackgroundTaskCompleted(task) => {
                completed += 1;
                println!(
                    "background-task-completed: {} -> {}",
                    task.tool_name, task.result
                );
            }
            EventKind::BackgroundTaskFailed(task) => {
                println!(
                    "background-task-failed: {} -> {}",
                    task.tool_name, task.result
                );
            }
            EventKind::StepFinish(step) if !step.output.text.is_empty() => {
                println!("supervisor: {}", step.output.text);
            }
            _ => {}
        }
    }
    let result = stream.result().await?;
    println!("\n{}\n({} steps)", result.text, result.steps.len());
    if started != 2 || completed != 2 || !result.text.contains("AI in education:") {
        return Err("both tasks should start, complete and reach the final answer".into());
    }
    Ok(())
}
