//! Agents and tools as workflow steps (an agent's events in the workflow's stream), and a
//! workflow as an agent's tool whose suspension suspends the call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kestrel_core::workflow::{Workflow, WorkflowStatus, create_step};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::workflow::{json_of, streamed};

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct V {
    v: i64,
}

#[tokio::test]
async fn agents_and_tools_are_steps() {
    use kestrel_core::agent::{Agent, AgentStep};
    use kestrel_core::model::{ScriptedModel, ScriptedResponse};
    use kestrel_core::workflow::ToolStep;
    let model = std::sync::Arc::new(ScriptedModel::from_fn(|req| {
        let asked = req.messages.last().unwrap().text();
        ScriptedResponse::text(format!("about {asked}"))
    }));
    let writer = Agent::builder("writer").model(model).build().unwrap();
    #[derive(Deserialize, JsonSchema)]
    struct Words {
        text: String,
    }
    let count = kestrel_core::tool::create_tool("count")
        .description("Counts words")
        .execute(|input: Words, _ctx| async move {
            Ok(json!({"words": input.text.split_whitespace().count()}))
        });
    let workflow = Workflow::builder("write")
        .map(|topic, _ctx| async move { Ok(json!({"prompt": topic["topic"]})) })
        .then(AgentStep::new(writer))
        .then(ToolStep::new(count))
        .commit()
        .unwrap();
    let (events, result) = streamed(&workflow, json!({"topic": "kestrels"})).await;
    assert_eq!(result.status, WorkflowStatus::Success, "{result:?}");
    assert_eq!(
        result.steps["writer"].output.as_deref(),
        Some(&json!({"text": "about kestrels"}))
    );
    assert_eq!(result.result, Some(json!({"words": 2})));
    let events = json_of(&events);
    let agent_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-output" && e["payload"]["stepName"] == "writer")
        .map(|e| &e["payload"]["output"])
        .collect();
    assert_eq!(agent_events.first().unwrap()["type"], "start");
    assert_eq!(agent_events.last().unwrap()["type"], "finish");
    assert!(agent_events.iter().all(|e| e["from"] == "AGENT"));
    let finish = events.last().unwrap();
    assert!(
        finish["payload"]["output"]["usage"]["totalTokens"]
            .as_u64()
            .is_some(),
        "{finish}"
    );

    // A tool step checks its input against the tool's schema.
    let count = kestrel_core::tool::create_tool("count")
        .description("Counts words")
        .execute(|input: Words, _ctx| async move { Ok(input.text.len()) });
    let strict = Workflow::builder("strict")
        .input_schema(json!(true))
        .then(ToolStep::new(count))
        .commit()
        .unwrap();
    let result = strict
        .create_run()
        .start(json!({"txt": "x"}))
        .await
        .unwrap();
    assert_eq!(result.status, WorkflowStatus::Failed);
    assert!(
        result
            .error
            .unwrap()
            .message
            .contains("invalid input for tool step")
    );
}

#[tokio::test]
async fn a_workflow_is_an_agents_tool_and_its_suspension_the_calls() {
    use kestrel_core::agent::Agent;
    use kestrel_core::message::Role;
    use kestrel_core::model::{ScriptedModel, ScriptedResponse};
    use kestrel_core::workflow::WorkflowTool;
    let review = create_step("review").execute(|n: V, ctx| async move {
        if n.v > 10 && ctx.resume_data().is_none() {
            return Err(ctx.suspend(json!({"question": "that many?"})));
        }
        Ok(V { v: n.v * 2 })
    });
    let workflow = Workflow::builder("double")
        .description("Doubles a number (big ones need a review)")
        .then(review)
        .commit()
        .unwrap();
    let model = std::sync::Arc::new(ScriptedModel::from_fn(|req| {
        let last = req.messages.last().unwrap();
        if last.role == Role::Tool {
            let parts = serde_json::to_string(&last.parts).unwrap();
            return ScriptedResponse::text(format!("done: {parts}"));
        }
        let v: i64 = last.text().trim().parse().unwrap_or(1);
        ScriptedResponse::tool_call("call-1", "workflow-double", json!({"v": v}))
    }));
    let agent = Agent::builder("doubler")
        .model(model)
        .tool(WorkflowTool::new(workflow.clone()))
        .build()
        .unwrap();

    let answer = agent.generate("4").await.unwrap();
    assert!(answer.text.contains("8"), "{}", answer.text);

    let stopped = agent.generate("20").await.unwrap();
    assert_eq!(stopped.waiting.len(), 1, "the call waits: {stopped:?}");
    let resumed = agent
        .run(&stopped.run_id)
        .resume("call-1", json!({"ok": true}))
        .await
        .unwrap();
    assert!(resumed.text.contains("40"), "{}", resumed.text);
    let run = workflow
        .create_run_with_id(format!("{}-call-1", stopped.run_id))
        .snapshot()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        run.status,
        WorkflowStatus::Success,
        "the same workflow run was resumed"
    );
}

#[tokio::test]
async fn an_agent_step_with_structured_output_gives_its_object() {
    use kestrel_core::agent::Agent;
    use kestrel_core::agent::AgentStep;
    use kestrel_core::model::{ScriptedModel, ScriptedResponse};

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Title {
        title: String,
    }
    let answers = |text: &'static str| {
        std::sync::Arc::new(ScriptedModel::from_fn(move |_| {
            ScriptedResponse::text(text)
        }))
    };
    let titler = Agent::builder("titler")
        .model(answers(r#"{"title": "Kestrels"}"#))
        .build()
        .unwrap();
    let step = AgentStep::new(titler).output_type::<Title>();
    let workflow = Workflow::builder("titles").then(step).commit().unwrap();
    let done = workflow
        .create_run()
        .start(json!({"prompt": "a title please"}))
        .await
        .unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    assert_eq!(done.result, Some(json!({"title": "Kestrels"})));

    // An answer that is not the object fails the step, naming the agent.
    let rambler = Agent::builder("rambler")
        .model(answers("no idea"))
        .build()
        .unwrap();
    let workflow = Workflow::builder("rambles")
        .then(AgentStep::new(rambler).output_type::<Title>())
        .commit()
        .unwrap();
    let failed = workflow
        .create_run()
        .start(json!({"prompt": "a title please"}))
        .await
        .unwrap();
    assert_eq!(failed.status, WorkflowStatus::Failed);
    let message = failed.error.unwrap().message;
    assert!(message.contains("rambler"), "{message}");
}

#[tokio::test]
async fn a_tool_step_whose_tool_suspends_suspends_the_step() {
    use kestrel_core::workflow::ToolStep;
    #[derive(Deserialize, JsonSchema)]
    struct Room {
        hotel: String,
    }
    // Asks twice, carrying the first answer in its suspend payload.
    let book = kestrel_core::tool::create_tool("book")
        .description("Books a room, asking twice")
        .execute(|room: Room, ctx| async move {
            let (Some(payload), Some(answer)) = (ctx.suspend_payload(), ctx.resume_data()) else {
                return Err(ctx.suspend(json!({"asked": "nights"})));
            };
            if payload["asked"] == "nights" {
                return Err(ctx.suspend(json!({"asked": "breakfast", "nights": answer["n"]})));
            }
            Ok(json!({
                "booked": format!("{}: {} nights, breakfast {}", room.hotel, payload["nights"], answer["breakfast"])
            }))
        });
    let workflow = Workflow::builder("stay")
        .then(ToolStep::new(book))
        .commit()
        .unwrap();
    let run = workflow.create_run();
    let first = run.start(json!({"hotel": "Tivoli"})).await.unwrap();
    assert_eq!(first.status, WorkflowStatus::Suspended, "{first:?}");
    let second = run.resume(None, json!({"n": 2})).await.unwrap();
    assert_eq!(second.status, WorkflowStatus::Suspended, "{second:?}");
    let done = run.resume(None, json!({"breakfast": true})).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    assert_eq!(
        done.result,
        Some(json!({"booked": "Tivoli: 2 nights, breakfast true"}))
    );
}
