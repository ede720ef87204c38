//! People and signals reach through a supervisor to its sub-agents: approvals, suspensions,
//! cancellation, pause and resume.
//!
//! `cargo run -p kestrel --example supervisor_control`
//!
//! Scripted models play the LLMs unless `KESTREL_MODEL` is set (then every agent runs on it).
//!
//! 1. A sub-agent's tool with `.require_approval(true)` stops the supervisor too: its stream
//!    shows a top-level `tool-call-approval` whose `via` is the delegation path. Approving it
//!    (`supervisor.run(run_id).approve(call_id)`) with the supervisor's run id and the
//!    sub-agent's call id continues both runs.
//! 2. A sub-agent's tool that calls `ctx.suspend(..)` surfaces as `tool-call-suspended`;
//!    `resume` on the supervisor's run hands the data down to it.
//! 3. An abort signal given to the supervisor stops the sub-agent in the middle of its work.
//! 4. `supervisor.run(run_id).pause()` pauses the supervisor and its active sub-agent at the
//!    next step boundary; `proceed()` continues both from where they stopped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel::model::{ModelRequest, ModelSpec};
use kestrel::prelude::*;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

/// The model of an agent: the configured one, or `script` when none is.
fn model_or(script: ScriptedModel) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script)),
    }
}

/// The tool results the model reads last, if its last message holds some.
fn last_results(req: &ModelRequest) -> Option<String> {
    let last = req.messages.last().filter(|m| m.role == Role::Tool)?;
    let results: Vec<String> = (last.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { result, .. } => Some(
                result
                    .as_str()
                    .map_or_else(|| result.to_string(), str::to_owned),
            ),
            _ => None,
        })
        .collect();
    Some(results.join("; "))
}

/// A script that calls `tool` once with `args`, then answers with the result.
fn calls_once(tool: &str, args: Value) -> ScriptedModel {
    let tool = tool.to_owned();
    ScriptedModel::from_fn(move |req| match last_results(req) {
        Some(result) => ScriptedResponse::text(result),
        None => ScriptedResponse::tool_call(format!("call-{tool}"), &tool, args.clone()),
    })
}

/// A supervisor that hands `task` to `child` and reports what it got back.
fn supervisor_of(child: Agent, task: &str) -> Result<Agent, Error> {
    let tool = format!("agent-{}", child.id());
    Ok(Agent::builder("supervisor")
        .instructions(format!(
            "Delegate every request to {tool}, then report its answer."
        ))
        .model(model_or(calls_once(&tool, json!({ "prompt": task }))))
        .agents([child])
        .build()?)
}

/// Reads a stream to the end. Prints the sub-agent's tool results and its end, which arrive
/// nested under the delegation's tool call (a `tool-output` holds each in its wire form), and
/// hands every event, with the nested one, to `on_event`.
async fn follow(
    mut stream: AgentStream,
    mut on_event: impl FnMut(&Event, Option<&Event>),
) -> Result<GenerateResult, AgentError> {
    while let Some(event) = stream.next().await {
        let nested = match &event.kind {
            EventKind::ToolOutput(out) => serde_json::from_value::<Event>(out.output.clone()).ok(),
            _ => None,
        };
        match nested.as_ref().map(|n| &n.kind) {
            Some(EventKind::ToolResult(r)) => {
                println!("   sub-agent: {} -> {}", r.tool_name, r.result)
            }
            Some(kind @ (EventKind::Abort(_) | EventKind::Finish(_))) => {
                println!("   sub-agent: {}", kind.type_name())
            }
            _ => {}
        }
        on_event(&event, nested.as_ref());
    }
    stream.result().await
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct UserId {
    #[serde(rename = "userId")]
    user_id: String,
}

async fn approval() -> Result<(), Error> {
    println!("1. A sub-agent's tool needs approval");
    let sensitive_data = create_tool("get-user-data")
        .description("Reads a user's record")
        .require_approval(true)
        .execute(|input: UserId, _ctx| async move {
            Ok(json!({ "userId": input.user_id, "name": "Ada", "plan": "pro" }))
        });
    let data_agent = Agent::builder("data")
        .description("Looks up user records.")
        .model(model_or(calls_once(
            "get-user-data",
            json!({ "userId": "123" }),
        )))
        .tool(sensitive_data)
        .build()?;
    let supervisor = supervisor_of(data_agent, "Get the record of user 123")?;
    let mut asked = None;
    let stream = supervisor.stream("Get data for user 123").into_stream();
    let stopped = follow(stream, |event, _| {
        if let EventKind::ToolCallApproval(p) = &event.kind {
            asked = Some(p.clone());
        }
    })
    .await?;
    let asked = asked.ok_or("no tool-call-approval on the supervisor's stream")?;
    let via: Vec<&str> = asked.via.iter().map(|hop| hop.agent_id.as_str()).collect();
    println!(
        "   tool requires approval: {} {} (via {}); the supervisor stopped: {}",
        asked.tool_name,
        asked.args,
        via.join(" > "),
        stopped.finish_reason.as_str()
    );
    if via.is_empty() || stopped.finish_reason != FinishReason::Suspended {
        return Err("the approval did not stop the supervisor with its delegation path".into());
    }
    // The decision names the supervisor's run and the sub-agent's call.
    let approved = supervisor
        .run(&stopped.run_id)
        .approve(&asked.tool_call_id)
        .fingerprint(&asked.fingerprint)
        .stream()
        .await?;
    let done = follow(approved, |_, _| {}).await?;
    println!("   approved; the supervisor answers: {}\n", done.text);
    if !done.text.contains("Ada") {
        return Err("the approved tool's result did not reach the supervisor".into());
    }
    Ok(())
}

async fn suspension() -> Result<(), Error> {
    println!("2. A sub-agent's tool suspends for input");
    let ask_budget = create_tool("ask_budget")
        .description("Asks the user for the trip's budget")
        .input_schema(json!({"type": "object"}))
        .resume_schema(json!({"type": "object", "properties": {"budget": {"type": "integer"}}}))
        .execute(|_: Value, ctx| async move {
            match ctx.resume_data() {
                Some(data) => Ok(format!("budget: {} EUR", data["budget"])),
                None => Err(ctx.suspend(json!({ "question": "What is the budget?" }))),
            }
        });
    let planner = Agent::builder("planner")
        .description("Plans trips within the user's budget.")
        .model(model_or(calls_once("ask_budget", json!({}))))
        .tool(ask_budget)
        .build()?;
    let supervisor = supervisor_of(planner, "Plan a weekend in Lisbon")?;
    let mut suspended = None;
    let stream = supervisor.stream("Plan my trip").into_stream();
    let stopped = follow(stream, |event, _| {
        if let EventKind::ToolCallSuspended(p) = &event.kind {
            let via: Vec<&str> = p.via.iter().map(|hop| hop.agent_id.as_str()).collect();
            println!(
                "   {} asks {} (via {})",
                p.tool_name,
                p.suspend_payload,
                via.join(" > ")
            );
            suspended = Some(p.tool_call_id.clone());
        }
    })
    .await?;
    let call_id = suspended.ok_or("no tool-call-suspended on the supervisor's stream")?;
    let resumed = supervisor
        .run(&stopped.run_id)
        .resume(call_id, json!({ "budget": 900 }))
        .stream()
        .await?;
    let done = follow(resumed, |_, _| {}).await?;
    println!("   resumed; the supervisor answers: {}\n", done.text);
    if !done.text.contains("900") {
        return Err("the resume data did not reach the sub-agent's tool".into());
    }
    Ok(())
}

async fn cancellation() -> Result<(), Error> {
    println!("3. Aborting the supervisor stops its sub-agent");
    let slow = Agent::builder("slow")
        .description("Researches thoroughly (takes a while).")
        .model(model_or(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("a very long report").with_delay(Duration::from_secs(30))
        })))
        .build()?;
    let supervisor = supervisor_of(slow, "Write a long report on AI trends")?;
    let signal = AbortSignal::new();
    let started = Instant::now();
    let options = RunOptions::new().abort_signal(signal.clone());
    let stream = supervisor
        .stream("Research AI trends")
        .options(options)
        .into_stream();
    let outcome = follow(stream, |_, nested| {
        // Abort as soon as the sub-agent starts its first model call.
        if nested.is_some_and(|n| matches!(n.kind, EventKind::StepStart(_))) {
            println!("   the sub-agent is working; aborting");
            signal.abort();
        }
    })
    .await;
    println!(
        "   the run ended after {:?}: {outcome:?}\n",
        started.elapsed()
    );
    match outcome {
        Err(AgentError::Aborted { .. }) if started.elapsed() < Duration::from_secs(10) => Ok(()),
        _ => Err("the run did not end aborted, at once".into()),
    }
}

async fn pause_and_resume() -> Result<(), Error> {
    println!("4. Pausing the supervisor pauses its sub-agent");
    // A sub-agent that works in three steps, one `work` call each, then answers.
    let worker_model = ScriptedModel::from_fn(|req| {
        match req.messages.iter().filter(|m| m.role == Role::Tool).count() {
            done @ 0..3 => {
                ScriptedResponse::tool_call(format!("w{done}"), "work", json!({ "part": done }))
                    .with_delay(Duration::from_millis(50))
            }
            done => ScriptedResponse::text(format!("finished {done} parts")),
        }
    });
    let work = create_tool("work")
        .description("Does one part of the job")
        .input_schema(json!({"type": "object", "properties": {"part": {"type": "integer"}}}))
        .execute(|input: Value, _ctx| async move { Ok(format!("part {} done", input["part"])) });
    let worker = Agent::builder("worker")
        .description("Does long jobs in parts.")
        .model(model_or(worker_model))
        .tool(work)
        .build()?;
    let supervisor = supervisor_of(worker, "Do the job in three parts")?;
    let run_id = "run-to-pause";
    let mut paused = false;
    let stream = supervisor.stream("Do the job").run_id(run_id).into_stream();
    let outcome = follow(stream, |_, nested| {
        // The sub-agent, and the supervisor with it, stop at the sub-agent's next step
        // boundary; the part it is already working on still finishes.
        if !paused && nested.is_some_and(|n| matches!(n.kind, EventKind::ToolResult(_))) {
            println!("   pausing run {run_id}");
            paused = supervisor.run(run_id).pause();
        }
    })
    .await;
    if !matches!(&outcome, Ok(result) if result.finish_reason == FinishReason::Paused) {
        return Err(format!("the run did not pause: {outcome:?}").into());
    }
    println!("   paused; resuming");
    let done = follow(supervisor.run(run_id).proceed().stream().await?, |_, _| {}).await?;
    println!("   the supervisor answers: {}", done.text);
    if done.run_id != run_id || !done.text.contains("finished") {
        return Err("the resumed run did not finish".into());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    approval().await?;
    suspension().await?;
    cancellation().await?;
    pause_and_resume().await
}
