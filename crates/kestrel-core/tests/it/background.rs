//! Background sub-agents: the delegation answers at once, the sub-agent runs on under the
//! instance's concurrency limit and its timeout, `background-task-*` events report it, and its
//! result reaches the parent model: before the next model call, or, with `until_idle`, in a
//! step the run waits for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{
    Agent, AgentBuildError, BackgroundTasks, BackgroundTool, DelegationOptions, RunOptions,
};
use kestrel_core::event::{Event, EventKind};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// The background reports the model reads (system messages), in order.
fn reports(req: &ModelRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|t| t.starts_with("[background task"))
        .collect()
}

fn researcher(delay: Duration) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(move |_| {
        ScriptedResponse::text("kestrels hover").with_delay(delay)
    }));
    let agent = Agent::builder("research")
        .description("Researches")
        .model(model.clone())
        .build()
        .unwrap();
    (agent, model)
}

/// A parent that starts the research in the background, says so, and answers each report.
fn parent(research: Agent, tasks: BackgroundTasks) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let tools = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        match (tools, reports(req).last()) {
            (0, _) => {
                ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "kestrels"}))
            }
            (_, None) => ScriptedResponse::text("Research started."),
            (_, Some(report)) => ScriptedResponse::text(format!("Got it: {report}")),
        }
    }));
    let agent = Agent::builder("supervisor")
        .model(model.clone())
        .agents([research])
        .background_tasks(tasks)
        .build()
        .unwrap();
    (agent, model)
}

async fn collect(
    mut stream: kestrel_core::agent::AgentStream,
) -> (Vec<Event>, kestrel_core::agent::GenerateResult) {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    (events, stream.result().await.unwrap())
}

fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

#[tokio::test]
async fn until_idle_keeps_the_stream_open_until_the_result_is_answered() {
    let (research, _) = researcher(Duration::from_millis(80));
    let (supervisor, model) = parent(
        research,
        BackgroundTasks::new().tool("research", BackgroundTool::enabled().timeout_ms(5_000)),
    );
    let (events, result) = collect(
        supervisor
            .stream("Research kestrels")
            .until_idle(true)
            .into_stream(),
    )
    .await;
    // The delegation answered at once: the parent spoke before the sub-agent finished.
    let first = model.requests()[1].clone();
    let tool_result = first.messages.last().unwrap().text();
    assert!(tool_result.is_empty() || !tool_result.contains("kestrels hover"));
    let kinds = types(&events);
    let started = kinds
        .iter()
        .position(|k| *k == "background-task-started")
        .unwrap();
    let answered = events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::TextDelta(p) if p.text == "Research started."))
        .unwrap();
    let completed = kinds
        .iter()
        .position(|k| *k == "background-task-completed")
        .unwrap();
    assert!(started < answered && answered < completed, "{kinds:?}");
    assert_eq!(
        *kinds.last().unwrap(),
        "finish",
        "one finish, at the very end: {kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "finish").count(), 1);
    let EventKind::BackgroundTaskCompleted(done) = &events[completed].kind else {
        unreachable!()
    };
    assert_eq!(done.tool_call_id, "d1");
    assert_eq!(done.tool_name, "agent-research");
    assert_eq!(done.result, json!("kestrels hover"));
    assert!(
        result.text.starts_with("Got it: [background task"),
        "{}",
        result.text
    );
    assert!(result.text.ends_with("kestrels hover"), "{}", result.text);
    assert_eq!(model.calls(), 3);
}

#[tokio::test]
async fn a_task_past_its_timeout_is_stopped_and_reported_as_failed() {
    let (research, _) = researcher(Duration::from_millis(2_000));
    let (supervisor, _) = parent(
        research,
        BackgroundTasks::new().tool("agent-research", BackgroundTool::enabled().timeout_ms(50)),
    );
    let (events, result) = collect(
        supervisor
            .stream("Research kestrels")
            .until_idle(true)
            .into_stream(),
    )
    .await;
    let failed = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::BackgroundTaskFailed(p) => Some(p.clone()),
            _ => None,
        })
        .expect("a background-task-failed event");
    assert!(failed.is_error);
    assert_eq!(
        failed.result,
        json!("The \"research\" agent did not finish within 50 ms and was stopped.")
    );
    assert!(result.text.contains("failed]"), "{}", result.text);
}

#[tokio::test]
async fn a_result_that_is_in_reaches_the_next_model_call() {
    // The sub-agent is quick; the parent is still busy with a slow tool of its own.
    let (research, _) = researcher(Duration::ZERO);
    let slow = create_tool("slow")
        .description("Takes a while")
        .execute(|_: Nothing, _ctx| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok("slow done")
        });
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        match req.messages.iter().filter(|m| m.role == Role::Tool).count() {
            0 => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "kestrels"})),
            1 => ScriptedResponse::tool_call("s1", "slow", json!({})),
            _ => ScriptedResponse::text(format!("reports: {}", reports(req).len())),
        }
    }));
    let supervisor = Agent::builder("supervisor")
        .model(model.clone())
        .agents([research])
        .tool(slow)
        .background_tasks(BackgroundTasks::new().tool("research", BackgroundTool::enabled()))
        .build()
        .unwrap();
    let result = supervisor.generate("Go").await.unwrap();
    assert_eq!(result.text, "reports: 1");
}

#[tokio::test]
async fn the_instance_limits_how_many_tasks_run_at_once() {
    let active = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let busy = |active: Arc<AtomicUsize>, peak: Arc<AtomicUsize>| {
        create_tool("dig")
            .description("Digs")
            .execute(move |_: Nothing, _ctx| {
                let (active, peak) = (active.clone(), peak.clone());
                async move {
                    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    active.fetch_sub(1, Ordering::SeqCst);
                    Ok("dug")
                }
            })
    };
    let digger = |id: &str| {
        let model = ScriptedModel::from_fn(|req| {
            if req.messages.iter().any(|m| m.role == Role::Tool) {
                ScriptedResponse::text("found it")
            } else {
                ScriptedResponse::tool_call("t", "dig", json!({}))
            }
        });
        Agent::builder(id)
            .description("Digs")
            .model(Arc::new(model))
            .tool(busy(active.clone(), peak.clone()))
            .build()
            .unwrap()
    };
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let tools = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        if tools == 0 {
            ScriptedResponse::tool_call("d1", "agent-north", json!({"prompt": "dig"}))
                .and_tool_call("d2", "agent-south", json!({"prompt": "dig"}).to_string())
        } else {
            ScriptedResponse::text(format!("{} reports", reports(req).len()))
        }
    }));
    let supervisor = Agent::builder("supervisor")
        .model(model)
        .agents([digger("north"), digger("south")])
        .background_tasks(
            BackgroundTasks::new()
                .tool("north", BackgroundTool::enabled())
                .tool("south", BackgroundTool::enabled()),
        )
        .max_steps(10)
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .background_concurrency(1)
        .agent(supervisor)
        .build()
        .unwrap();
    let result = kestrel
        .agent("supervisor")
        .unwrap()
        .generate("Dig both")
        .until_idle(true)
        .await
        .unwrap();
    assert_eq!(result.text, "2 reports");
    assert_eq!(peak.load(Ordering::SeqCst), 1, "one task at a time");
}

#[tokio::test]
async fn background_results_get_no_reference_and_unknown_tools_are_refused() {
    let (research, _) = researcher(Duration::ZERO);
    let (supervisor, model) = parent(
        research,
        BackgroundTasks::new().tool("research", BackgroundTool::enabled()),
    );
    let options = RunOptions::new()
        .until_idle(true)
        .delegation(DelegationOptions::new().enable_result_references(true));
    supervisor
        .generate("Research")
        .options(options)
        .await
        .unwrap();
    for req in model.requests() {
        for m in &req.messages {
            assert!(!m.text().contains("[ref:"), "no reference: {}", m.text());
        }
    }

    let (research, _) = researcher(Duration::ZERO);
    let err = Agent::builder("supervisor")
        .model(Arc::new(ScriptedModel::new()))
        .agents([research])
        .background_tasks(BackgroundTasks::new().tool("reserch", BackgroundTool::enabled()))
        .build()
        .unwrap_err();
    assert!(matches!(err, AgentBuildError::UnknownBackgroundTool { .. }));
    assert_eq!(
        err.to_string(),
        "agent \"supervisor\": background_tasks names agent-reserch, which is not among its \
         sub-agents (research)"
    );
}
