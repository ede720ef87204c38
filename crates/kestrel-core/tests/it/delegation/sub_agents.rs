//! Sub-agents as tools: what the parent sees, nested events, failures, the request context
//! copied in, abort propagation and the depth limit.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::delegation::MAX_DELEGATION_DEPTH;
use kestrel_core::agent::{Agent, AgentError};
use kestrel_core::context::{
    RESOURCE_ID_KEY, RUN_ID_KEY, RUN_IDENTITY_KEYS, RequestContext, THREAD_ID_KEY,
};
use kestrel_core::event::EventKind;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{
    FinishReason, ModelError, ModelEvent, ScriptStep, ScriptedModel, ScriptedResponse, Usage,
};
use kestrel_core::tool::create_tool;
use serde_json::{Value, json};

use super::{last_results, sub_agent, supervisor};

#[tokio::test]
async fn sub_agents_are_tools_and_the_parent_sees_their_text() {
    let (research, research_model) = sub_agent("research", "Finds facts", "Kestrels hover");
    let (writing, writing_model) = sub_agent("writing", "Writes prose", "A hovering falcon");
    let (agent, model) = supervisor(research, writing);
    let result = agent.generate("Tell me about kestrels").await.unwrap();
    assert_eq!(result.text, "final: Kestrels hover. + A hovering falcon.");
    assert_eq!(result.finish_reason, FinishReason::Stop);

    // The tools the supervisor's model is offered.
    let tools = &model.requests()[0].tools;
    let research_tool = tools.iter().find(|t| t.name == "agent-research").unwrap();
    assert_eq!(research_tool.description, "Finds facts");
    assert_eq!(research_tool.input_schema["required"], json!(["prompt"]));
    assert!(tools.iter().any(|t| t.name == "agent-writing"));

    // The research agent got the conversation as text, then the prompt; no tool parts.
    let asked = &research_model.requests()[0];
    let texts: Vec<(Role, String)> = asked.messages.iter().map(|m| (m.role, m.text())).collect();
    assert_eq!(
        texts,
        [
            (Role::System, "You are the research agent.".to_owned()),
            (Role::User, "Tell me about kestrels".to_owned()),
            (Role::User, "Find facts about kestrels".to_owned()),
        ]
    );
    // The writing agent saw the earlier delegation only through the parent's text (none here).
    let asked = &writing_model.requests()[0];
    assert!(
        asked
            .messages
            .iter()
            .all(|m| m.parts.iter().all(|p| matches!(p, Part::Text { .. })))
    );
    assert_eq!(
        asked.messages.last().unwrap().text(),
        "Write one line from the facts"
    );
}

#[tokio::test]
async fn the_sub_agents_events_stream_nested_under_the_delegation() {
    let (research, _) = sub_agent("research", "Finds facts", "Kestrels hover");
    let (writing, _) = sub_agent("writing", "Writes prose", "A hovering falcon");
    let (agent, _) = supervisor(research, writing);
    let (events, result) = agent
        .stream("Tell me about kestrels")
        .into_stream()
        .collect()
        .await;
    let result = result.unwrap();
    let nested: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolOutput(p) => Some((p.tool_call_id.clone(), p.output.clone())),
            _ => None,
        })
        .collect();
    let research: Vec<&Value> = nested
        .iter()
        .filter(|(id, _)| id == "d1")
        .map(|(_, o)| o)
        .collect();
    let types: Vec<&str> = research
        .iter()
        .map(|o| o["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"start"));
    assert_eq!(types.last(), Some(&"finish"));
    assert!(types.contains(&"text-delta"));
    // The nested events are the sub-agent's own run, not the parent's.
    let child_run = research[0]["runId"].as_str().unwrap();
    assert_ne!(child_run, result.run_id);
    assert!(nested.iter().any(|(id, _)| id == "d2"));
    // Each delegation's result follows its nested events.
    let position = |pred: &dyn Fn(&EventKind) -> bool| events.iter().position(|e| pred(&e.kind));
    let last_nested = events
        .iter()
        .rposition(|e| matches!(&e.kind, EventKind::ToolOutput(p) if p.tool_call_id == "d1"))
        .unwrap();
    let result_d1 =
        position(&|k| matches!(k, EventKind::ToolResult(p) if p.tool_call_id == "d1")).unwrap();
    assert!(last_nested < result_d1);
}

#[tokio::test]
async fn a_failing_sub_agent_gives_a_generic_failed_result_and_the_parent_goes_on() {
    let broken = Agent::builder("research")
        .description("Finds facts")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::BadRequest {
                provider: "openai".into(),
                status: 400,
                message: "secret internal provider detail".into(),
            })
        })))
        .build()
        .unwrap();
    let (writing, _) = sub_agent("writing", "Writes prose", "A hovering falcon");
    let model = Arc::new(ScriptedModel::from_fn(|req| match last_results(req) {
        None => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "facts"})),
        Some(results) => ScriptedResponse::text(format!("saw: {results}")),
    }));
    let agent = Agent::builder("supervisor")
        .model(model)
        .agents([broken, writing])
        .build()
        .unwrap();
    let result = agent.generate("go").await.unwrap();
    assert_eq!(
        result.text,
        "saw: error: The \"research\" agent could not complete the task."
    );
    assert!(!result.text.contains("secret"));
}

#[tokio::test]
async fn the_request_context_is_copied_into_the_sub_agent_and_does_not_leak_back() {
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen_in_tool = seen.clone();
    let note = create_tool("note")
        .description("Reads and writes the context")
        .input_schema(json!({"type": "object"}))
        .execute(move |_input: Value, ctx| {
            let seen = seen_in_tool.clone();
            async move {
                let context = ctx.request_context();
                *seen.lock().unwrap() = Some((
                    context.get("user"),
                    RUN_IDENTITY_KEYS.iter().any(|k| context.contains(k)),
                ));
                context.set("child-only", "x");
                Ok("noted")
            }
        });
    let child = Agent::builder("child")
        .description("Takes notes")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            match last_results(req) {
                None => ScriptedResponse::tool_call("n1", "note", json!({})),
                Some(_) => ScriptedResponse::text("done"),
            }
        })))
        .tool(note)
        .build()
        .unwrap();
    let parent = Agent::builder("parent")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            match last_results(req) {
                None => ScriptedResponse::tool_call("d1", "agent-child", json!({"prompt": "note"})),
                Some(r) => ScriptedResponse::text(r),
            }
        })))
        .agents([child])
        .build()
        .unwrap();
    let context = RequestContext::new();
    context.set("user", "ada");
    // The parent's identity is its own: the sub-agent runs without it.
    context.set(RESOURCE_ID_KEY, "ada");
    context.set(THREAD_ID_KEY, "t-1");
    context.set(RUN_ID_KEY, "r-1");
    let result = parent
        .generate("go")
        .request_context(context.clone())
        .await
        .unwrap();
    assert_eq!(result.text, "done");
    assert_eq!(
        seen.lock().unwrap().clone(),
        Some((Some(json!("ada")), false)),
        "the entries are copied, the run identity keys are not"
    );
    assert!(!context.contains("child-only"), "the child's change leaked");
}

#[tokio::test]
async fn aborting_the_parent_stops_the_running_sub_agent() {
    let slow = Arc::new(ScriptedModel::from_fn(|_| {
        let mut steps = Vec::new();
        for _ in 0..50 {
            steps.push(ScriptStep::Delay(Duration::from_millis(20)));
            steps.push(ScriptStep::Event(ModelEvent::TextDelta {
                text: "x".into(),
            }));
        }
        ScriptedResponse::steps(steps).finish(FinishReason::Stop, Usage::default())
    }));
    let child = Agent::builder("slow")
        .description("Takes its time")
        .model(slow.clone())
        .build()
        .unwrap();
    let parent = Agent::builder("parent")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            match last_results(req) {
                None => ScriptedResponse::tool_call("d1", "agent-slow", json!({"prompt": "go"})),
                Some(r) => ScriptedResponse::text(r),
            }
        })))
        .agents([child])
        .build()
        .unwrap();
    let mut stream = parent.stream("start").into_stream();
    let mut deltas = 0;
    let mut child_ended_with = None;
    while let Some(event) = stream.next().await {
        if let EventKind::ToolOutput(p) = &event.kind {
            match p.output["type"].as_str() {
                Some("text-delta") => {
                    deltas += 1;
                    stream.abort();
                }
                Some(kind @ ("abort" | "finish")) => child_ended_with = Some(kind.to_owned()),
                _ => {}
            }
        }
    }
    let error = stream.result().await.unwrap_err();
    assert!(matches!(error, AgentError::Aborted { .. }), "{error:?}");
    // The child stopped at once: it streamed a few of its 50 deltas and ended with `abort`.
    assert!(deltas < 50, "{deltas} deltas");
    assert_eq!(child_ended_with.as_deref(), Some("abort"));
    assert_eq!(slow.calls(), 1);
}

#[tokio::test]
async fn agents_delegating_in_a_cycle_stop_at_the_depth_limit() {
    // An agent that always delegates to a copy of itself, built bottom-up to a chain deeper
    // than the limit.
    let delegating = |next: Option<Agent>, level: u64| {
        let model = Arc::new(ScriptedModel::from_fn(move |req| match last_results(req) {
            None => ScriptedResponse::tool_call(
                format!("d{level}"),
                "agent-loop",
                json!({"prompt": "again"}),
            ),
            Some(r) => ScriptedResponse::text(r),
        }));
        let mut builder = Agent::builder("loop")
            .description("Delegates again")
            .model(model);
        if let Some(next) = next {
            builder = builder.agents([next]);
        }
        builder.build().unwrap()
    };
    let mut chain = None;
    for level in (0..=MAX_DELEGATION_DEPTH + 1).rev() {
        chain = Some(delegating(chain, level));
    }
    let result = chain.unwrap().generate("start").await.unwrap();
    assert!(
        result
            .text
            .contains("delegations nest deeper than 8 levels"),
        "{}",
        result.text
    );
}
