//! Agent networks end to end on each store: the events of an agent, a workflow and a tool
//! delegation in Mastra's shapes, a prompt that does not fit reported to the router, memory
//! required, an approval inside a delegated agent decided with the network's run id after a
//! restart, a network tool declined, scorers with feedback, and an abort reaching the
//! sub-agent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::abort::AbortSignal;
use kestrel_core::agent::Agent;
use kestrel_core::definition::iteration::{Score, ScorerFn};
use kestrel_core::event::{Event, EventKind};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::network::{NetworkCompletion, NetworkError, NetworkStatus};
use kestrel_core::tool::create_tool;
use kestrel_core::workflow::{Workflow, create_step};
use kestrel_memory::Memory;
use kestrel_storage::Selection;
use serde_json::{Value, json};

use super::common::{Store, run};

const THREAD: &str = "net-thread";
const RESOURCE: &str = "u1";

fn route(id: &str, kind: &str, prompt: &str, reason: &str) -> ScriptedResponse {
    ScriptedResponse::text(
        json!({"primitiveId": id, "primitiveType": kind, "prompt": prompt, "selectionReason": reason})
            .to_string(),
    )
}

fn verdict(complete: bool, reason: &str, final_result: &str) -> ScriptedResponse {
    ScriptedResponse::text(
        json!({"isComplete": complete, "completionReason": reason, "finalResult": final_result})
            .to_string(),
    )
}

fn scripted(responses: Vec<ScriptedResponse>) -> Arc<ScriptedModel> {
    Arc::new(
        responses
            .into_iter()
            .fold(ScriptedModel::new(), ScriptedModel::respond),
    )
}

fn doubler() -> Workflow {
    let double = create_step("double")
        .input_schema(
            json!({"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}),
        )
        .execute(|n: Value, _ctx| async move { Ok(json!({"v": n["v"].as_i64().unwrap() * 2})) });
    Workflow::builder("doubler")
        .description("Doubles v")
        .input_schema(
            json!({"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}),
        )
        .then(double)
        .commit()
        .unwrap()
}

fn shout(approval: bool, runs: Arc<AtomicUsize>) -> kestrel_core::tool::FnTool {
    create_tool("shout")
        .description("Upper-cases a text")
        .require_approval(approval)
        .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .execute(move |input: Value, _ctx| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(input["text"].as_str().unwrap_or_default().to_uppercase())
            }
        })
}

/// The network agent `router` over `store`, with the sub-agent `helper`, the workflow
/// `doubler` and the tool `shout`.
fn instance(
    store: &Store,
    router: Arc<ScriptedModel>,
    helper: Arc<ScriptedModel>,
    helper_tool: Option<kestrel_core::tool::FnTool>,
    shout_approval: bool,
    shouts: Arc<AtomicUsize>,
) -> Kestrel {
    let memory = Memory::builder(Arc::clone(store)).build().unwrap();
    let mut helper_agent = Agent::builder("helper")
        .description("Greets people")
        .model(helper);
    if let Some(tool) = helper_tool {
        helper_agent = helper_agent.tool(tool);
    }
    let network = Agent::builder("router")
        .instructions("Greet, double and shout as asked.")
        .model(router)
        .memory(memory.clone())
        .agents([helper_agent.build().unwrap()])
        .workflow(doubler())
        .tool(shout(shout_approval, shouts))
        .build()
        .unwrap();
    Kestrel::builder()
        .memory(memory)
        .agent(network)
        .build()
        .unwrap()
}

fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::type_name).collect()
}

fn wire(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn payload_of<'a>(json: &'a [Value], kind: &str) -> &'a Value {
    &json
        .iter()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event"))["payload"]
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

async fn thread_texts(store: &Store) -> Vec<(Role, String)> {
    store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| {
            let message = kestrel_core::message::Message {
                id: m.id,
                role: m.role,
                parts: m.parts,
            };
            (message.role, message.text())
        })
        .collect()
}

async fn an_agent_delegation_streams_mastras_events(store: Store) {
    let router = scripted(vec![
        route("helper", "agent", "say hi", "helper can greet"),
        verdict(true, "greeted", ""),
    ]);
    let helper = scripted(vec![ScriptedResponse::text("hi there")]);
    let kestrel = instance(&store, router, helper, None, false, Arc::default());
    let agent = kestrel.agent("router").unwrap();
    let stream = agent
        .network("Greet me")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap();
    let run_id = stream.run_id().to_owned();
    let (events, result) = stream.collect().await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.result, "hi there");
    let kinds = types(&events);
    assert_eq!(
        kinds,
        [
            "routing-agent-start",
            "routing-agent-end",
            "agent-execution-start",
            "agent-execution-event-start",
            "agent-execution-event-step-start",
            "agent-execution-event-text-start",
            "agent-execution-event-text-delta",
            "agent-execution-event-text-end",
            "agent-execution-event-step-finish",
            "agent-execution-event-finish",
            "agent-execution-end",
            "network-validation-start",
            "routing-agent-text-start",
            "routing-agent-text-delta",
            "network-validation-end",
            "network-execution-event-finish",
        ],
    );
    // Every event: the network's run, from NETWORK; the JSON reads back as the same event.
    let json = wire(&events);
    for (event, wire) in events.iter().zip(&json) {
        assert_eq!(wire["runId"], run_id.as_str());
        assert_eq!(wire["from"], "NETWORK");
        let back: Event = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(&back, event);
    }
    // The fixture shapes of mastra-next.md §2, field by field.
    let start = payload_of(&json, "routing-agent-start");
    assert_eq!(
        keys(start),
        set(&["networkId", "agentId", "runId", "inputData"])
    );
    assert_eq!(start["networkId"], "router");
    assert_eq!(start["agentId"], "routing-agent");
    assert_eq!(
        keys(&start["inputData"]),
        set(&[
            "task",
            "primitiveId",
            "primitiveType",
            "iteration",
            "threadResourceId",
            "threadId",
            "isOneOff",
            "verboseIntrospection"
        ])
    );
    assert_eq!(start["inputData"]["task"], "Greet me");
    assert_eq!(start["inputData"]["primitiveType"], "none");
    assert_eq!(start["inputData"]["iteration"], 0);
    assert_eq!(start["inputData"]["threadId"], THREAD);
    assert_eq!(start["inputData"]["verboseIntrospection"], true);
    let end = payload_of(&json, "routing-agent-end");
    assert_eq!(
        keys(end),
        set(&[
            "task",
            "result",
            "primitiveId",
            "primitiveType",
            "prompt",
            "isComplete",
            "selectionReason",
            "iteration",
            "runId",
            "conversationContext",
            "usage"
        ])
    );
    assert_eq!(end["primitiveId"], "helper");
    assert_eq!(end["primitiveType"], "agent");
    assert_eq!(end["prompt"], "say hi");
    assert_eq!(end["isComplete"], false);
    assert_eq!(end["selectionReason"], "helper can greet");
    assert!(end["usage"]["totalTokens"].is_u64());
    // The task is in the conversation a sub-agent gets.
    assert_eq!(end["conversationContext"][0]["role"], "user");
    let exec_start = payload_of(&json, "agent-execution-start");
    assert_eq!(keys(exec_start), set(&["agentId", "args", "runId"]));
    assert_eq!(exec_start["args"]["prompt"], "say hi");
    let sub_run = exec_start["runId"].as_str().unwrap();
    let delta = payload_of(&json, "agent-execution-event-text-delta");
    assert_eq!(keys(delta), set(&["type", "runId", "from", "payload"]));
    assert_eq!(delta["type"], "text-delta");
    assert_eq!(delta["from"], "AGENT");
    assert_eq!(delta["runId"], sub_run);
    assert_eq!(delta["payload"]["text"], "hi there");
    let exec_end = payload_of(&json, "agent-execution-end");
    assert_eq!(
        keys(exec_end),
        set(&[
            "task",
            "agentId",
            "result",
            "isComplete",
            "iteration",
            "runId",
            "usage"
        ])
    );
    assert_eq!(exec_end["result"], "hi there");
    assert_eq!(exec_end["runId"], sub_run);
    let validation = payload_of(&json, "network-validation-start");
    assert_eq!(
        keys(validation),
        set(&["runId", "iteration", "checksCount"])
    );
    assert_eq!(validation["checksCount"], 1);
    assert_eq!(
        keys(payload_of(&json, "routing-agent-text-start")),
        set(&["runId"])
    );
    assert_eq!(
        payload_of(&json, "routing-agent-text-delta"),
        &json!({"text": "hi there"})
    );
    let checked = payload_of(&json, "network-validation-end");
    assert_eq!(
        keys(checked),
        set(&[
            "runId",
            "iteration",
            "passed",
            "results",
            "duration",
            "timedOut",
            "reason",
            "maxIterationReached",
            "suppressFeedback"
        ])
    );
    assert_eq!(checked["passed"], true);
    assert_eq!(checked["reason"], "greeted");
    assert_eq!(
        keys(&checked["results"][0]),
        set(&[
            "score",
            "passed",
            "reason",
            "finalResult",
            "scorerId",
            "scorerName",
            "duration"
        ])
    );
    assert_eq!(checked["results"][0]["scorerId"], "default-completion");
    assert_eq!(
        checked["results"][0]["scorerName"],
        "Default LLM Completion"
    );
    assert_eq!(checked["results"][0]["score"], 1.0);
    let finish = payload_of(&json, "network-execution-event-finish");
    assert_eq!(
        keys(finish),
        set(&[
            "task",
            "isComplete",
            "completionReason",
            "result",
            "primitiveId",
            "primitiveType",
            "iteration",
            "isOneOff",
            "threadId",
            "threadResourceId",
            "validationPassed",
            "usage"
        ])
    );
    assert_eq!(finish["completionReason"], "greeted");
    assert_eq!(finish["primitiveId"], "helper");
    assert_eq!(
        keys(&finish["usage"]),
        set(&[
            "inputTokens",
            "outputTokens",
            "totalTokens",
            "cachedInputTokens",
            "cacheCreationInputTokens",
            "reasoningTokens"
        ])
    );
    // The thread: the task, the iteration's record, the final answer, the feedback.
    let thread = thread_texts(&store).await;
    assert_eq!(thread.len(), 4, "{thread:#?}");
    assert_eq!(thread[0], (Role::User, "Greet me".to_owned()));
    let record: Value = serde_json::from_str(&thread[1].1).unwrap();
    assert_eq!(record["isNetwork"], true);
    assert_eq!(record["primitiveId"], "helper");
    assert_eq!(record["primitiveType"], "agent");
    assert_eq!(record["input"], "say hi");
    assert_eq!(record["finalResult"]["text"], "hi there");
    assert_eq!(thread[2], (Role::Assistant, "hi there".to_owned()));
    assert!(
        thread[3].1.starts_with("#### Completion Check Results"),
        "{}",
        thread[3].1
    );
    assert!(thread[3].1.contains("✅ The task is complete."));
}

async fn a_workflow_then_a_tool_then_none(store: Store) {
    let router = scripted(vec![
        route(
            "doubler",
            "workflow",
            r#"{"v": 21}"#,
            "doubling is a workflow",
        ),
        verdict(false, "still to shout", ""),
        route("shout", "tool", r#"{"text": "done"}"#, "shouting is a tool"),
        verdict(false, "almost", ""),
        route("none", "none", "", "all done"),
    ]);
    let shouts = Arc::new(AtomicUsize::new(0));
    let kestrel = instance(
        &store,
        router,
        scripted(vec![]),
        None,
        false,
        Arc::clone(&shouts),
    );
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network("Double 21 and shout done")
        .memory(THREAD, RESOURCE)
        .max_steps(5)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.iteration, 2);
    // The router found it complete itself: the last primitive's answer is the result.
    assert_eq!(result.result, "DONE");
    assert_eq!(shouts.load(Ordering::SeqCst), 1);
    let kinds = types(&events);
    for expected in [
        "workflow-execution-start",
        "workflow-execution-event-workflow-start",
        "workflow-execution-event-workflow-step-start",
        "workflow-execution-event-workflow-step-result",
        "workflow-execution-event-workflow-finish",
        "workflow-execution-end",
        "tool-execution-start",
        "tool-execution-end",
        "network-execution-event-step-finish",
        "network-execution-event-finish",
    ] {
        assert!(kinds.contains(&expected), "no {expected} in {kinds:?}");
    }
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "routing-agent-start")
            .count(),
        3
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "network-validation-end")
            .count(),
        3
    );
    let json = wire(&events);
    let wf_end = payload_of(&json, "workflow-execution-end");
    assert_eq!(
        keys(wf_end),
        set(&[
            "task",
            "primitiveId",
            "primitiveType",
            "result",
            "isComplete",
            "iteration",
            "name",
            "runId",
            "usage"
        ])
    );
    assert_eq!(wf_end["result"]["status"], "success");
    assert_eq!(wf_end["result"]["result"], json!({"v": 42}));
    let tool_start = payload_of(&json, "tool-execution-start");
    assert_eq!(keys(tool_start), set(&["args", "runId"]));
    assert_eq!(tool_start["args"]["args"], json!({"text": "done"}));
    assert_eq!(tool_start["args"]["toolName"], "shout");
    assert!(tool_start["args"]["toolCallId"].is_string());
    assert_eq!(tool_start["args"]["selectionReason"], "shouting is a tool");
    let tool_end = payload_of(&json, "tool-execution-end");
    assert_eq!(
        keys(tool_end),
        set(&[
            "task",
            "primitiveId",
            "primitiveType",
            "result",
            "isComplete",
            "iteration",
            "toolCallId",
            "toolName"
        ])
    );
    assert_eq!(tool_end["result"], "DONE");
    let step_finish = payload_of(&json, "network-execution-event-step-finish");
    assert_eq!(
        keys(step_finish),
        set(&["task", "result", "isComplete", "iteration", "runId"])
    );
    assert_eq!(step_finish["result"], "all done");
    // Iteration records in the thread: the workflow's and the tool's.
    let thread = thread_texts(&store).await;
    let records: Vec<Value> = thread
        .iter()
        .filter_map(|(_, text)| serde_json::from_str::<Value>(text).ok())
        .filter(|v| v["isNetwork"] == true)
        .collect();
    assert_eq!(records.len(), 2, "{thread:#?}");
    assert_eq!(records[0]["finalResult"]["runResult"], json!({"v": 42}));
    assert_eq!(records[1]["finalResult"]["result"], "DONE");
}

async fn a_prompt_that_does_not_fit_is_reported_to_the_router(store: Store) {
    let router = scripted(vec![
        route("doubler", "workflow", "twenty-one", "doubling"),
        verdict(false, "the workflow was not given JSON", ""),
        route("doubler", "workflow", r#"{"v": "21"}"#, "doubling again"),
        verdict(false, "v must be a number", ""),
    ]);
    let kestrel = instance(
        &store,
        router.clone(),
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    );
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network("Double 21")
        .memory(THREAD, RESOURCE)
        .max_steps(2)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::MaxIterations, "{result:?}");
    assert_eq!(
        result.completion_reason.as_deref(),
        Some("Max iterations reached: 2")
    );
    let kinds = types(&events);
    assert!(!kinds.contains(&"workflow-execution-start"), "{kinds:?}");
    // The failures are in the thread, where the second routing call read the first.
    let thread = thread_texts(&store).await;
    let errors: Vec<String> = thread
        .iter()
        .filter_map(|(_, text)| serde_json::from_str::<Value>(text).ok())
        .filter_map(|v| v["finalResult"]["error"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(errors.len(), 2, "{thread:#?}");
    assert!(errors[0].contains("not valid JSON"), "{}", errors[0]);
    assert!(
        errors[1].contains("does not match its input schema"),
        "{}",
        errors[1]
    );
    let second_routing = &router.requests()[2];
    let seen: String = second_routing
        .messages
        .iter()
        .map(|m| m.text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(seen.contains("not valid JSON"), "{seen}");
    // The routing agent may only name primitives that exist.
    let schema = second_routing.response_format.as_ref().unwrap();
    let text = format!("{schema:?}");
    assert!(text.contains("doubler") && text.contains("helper") && text.contains("shout"));
}

async fn an_approval_in_a_delegated_agent_is_decided_with_the_network_run_id(store: Store) {
    let sends = Arc::new(AtomicUsize::new(0));
    let send = {
        let sends = Arc::clone(&sends);
        move || {
            let sends = Arc::clone(&sends);
            create_tool("send_card")
                .description("Sends a card")
                .require_approval(true)
                .input_schema(json!({"type": "object"}))
                .execute(move |_input: Value, _ctx| {
                    let sends = Arc::clone(&sends);
                    async move {
                        sends.fetch_add(1, Ordering::SeqCst);
                        Ok("card sent")
                    }
                })
        }
    };
    let router = scripted(vec![route(
        "helper",
        "agent",
        "send a card",
        "helper sends cards",
    )]);
    let helper = scripted(vec![ScriptedResponse::tool_call(
        "c1",
        "send_card",
        json!({}),
    )]);
    let first = instance(&store, router, helper, Some(send()), false, Arc::default());
    let agent = first.agent("router").unwrap();
    let (events, result) = agent
        .network("Send a card")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Suspended, "{result:?}");
    let run_id = result.run_id.clone();
    let kinds = types(&events);
    assert_eq!(kinds.last(), Some(&"agent-execution-approval"), "{kinds:?}");
    assert!(kinds.contains(&"agent-execution-event-tool-call-approval"));
    let json = wire(&events);
    let approval = payload_of(&json, "agent-execution-approval");
    assert_eq!(
        keys(approval),
        set(&[
            "args",
            "agentId",
            "runId",
            "toolName",
            "toolCallId",
            "usage",
            "selectionReason",
            "resumeSchema"
        ])
    );
    assert_eq!(approval["toolName"], "helper");
    assert_eq!(approval["args"], json!({"prompt": "send a card"}));
    assert_eq!(sends.load(Ordering::SeqCst), 0);
    drop(first);

    // Another process over the same storage decides it.
    let router = scripted(vec![verdict(true, "the card is sent", "")]);
    let helper = scripted(vec![ScriptedResponse::text("I sent the card.")]);
    let second = instance(&store, router, helper, Some(send()), false, Arc::default());
    let agent = second.agent("router").unwrap();
    let (events, result) = agent
        .approve_network(&run_id)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.result, "I sent the card.");
    assert_eq!(sends.load(Ordering::SeqCst), 1);
    let kinds = types(&events);
    assert_eq!(kinds[0], "agent-execution-start", "{kinds:?}");
    assert!(kinds.contains(&"agent-execution-event-tool-result"));
    assert!(kinds.contains(&"agent-execution-end"));
    assert_eq!(kinds.last(), Some(&"network-execution-event-finish"));
    // Decided once: a second approval finds nothing waiting.
    let again = agent.approve_network(&run_id).await;
    assert!(
        matches!(again, Err(NetworkError::NotFound { .. })),
        "{again:?}"
    );
}

async fn a_network_tool_that_needs_approval_can_be_declined(store: Store) {
    let shouts = Arc::new(AtomicUsize::new(0));
    let router = scripted(vec![route(
        "shout",
        "tool",
        r#"{"text": "hey"}"#,
        "shouting",
    )]);
    let kestrel = instance(
        &store,
        router.clone(),
        scripted(vec![]),
        None,
        true,
        Arc::clone(&shouts),
    );
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network("Shout hey")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Suspended);
    assert_eq!(types(&events).last(), Some(&"tool-execution-approval"));
    let json = wire(&events);
    let approval = payload_of(&json, "tool-execution-approval");
    assert_eq!(
        keys(approval),
        set(&[
            "toolName",
            "toolCallId",
            "args",
            "selectionReason",
            "runId",
            "resumeSchema"
        ])
    );
    assert_eq!(approval["runId"], result.run_id.as_str());
    router.push(verdict(false, "it was declined", ""));
    let (events, result) = agent
        .decline_network(&result.run_id, Some("too loud".into()))
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::MaxIterations, "{result:?}");
    assert_eq!(
        shouts.load(Ordering::SeqCst),
        0,
        "a declined tool never runs"
    );
    let json = wire(&events);
    assert_eq!(
        payload_of(&json, "tool-execution-end")["result"],
        "Tool call was not approved by the user: too loud"
    );
}

async fn scorers_decide_and_their_feedback_reaches_the_router(store: Store) {
    let router = scripted(vec![
        route("shout", "tool", r#"{"text": "hi"}"#, "shout it"),
        route(
            "shout",
            "tool",
            r#"{"text": "hi there"}"#,
            "shout it longer",
        ),
    ]);
    let kestrel = instance(
        &store,
        router.clone(),
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    );
    let agent = kestrel.agent("router").unwrap();
    let long_enough = ScorerFn::new("long-enough", |task| async move {
        let passed = task.answer.len() > 5;
        Ok(Score {
            scorer: String::new(),
            passed,
            score: if passed { 1.0 } else { 0.0 },
            reason: Some(
                if passed {
                    "long enough"
                } else {
                    "too short: say more"
                }
                .to_owned(),
            ),
        })
    });
    let (events, result) = agent
        .network("Shout a greeting")
        .memory(THREAD, RESOURCE)
        .max_steps(3)
        .completion(NetworkCompletion::new().scorer(long_enough))
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.result, "HI THERE");
    assert_eq!(result.iteration, 1);
    let json: Vec<Value> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::NetworkValidationEnd(_)))
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(json[0]["payload"]["passed"], false);
    assert_eq!(
        json[0]["payload"]["results"][0]["scorerName"],
        "long-enough"
    );
    assert_eq!(json[1]["payload"]["passed"], true);
    // The first check's feedback was in the second routing call's conversation.
    let seen: String = router.requests()[1]
        .messages
        .iter()
        .map(|m| m.text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(seen.contains("too short: say more"), "{seen}");
}

async fn the_rubric_scorer_any_strategy_timeout_and_suppressed_feedback(store: Store) {
    use kestrel_core::definition::iteration::{CompletionStrategy, RubricScorer};
    let router = scripted(vec![route(
        "shout",
        "tool",
        r#"{"text": "hi"}"#,
        "shout it",
    )]);
    let kestrel = instance(
        &store,
        router,
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    );
    let agent = kestrel.agent("router").unwrap();
    // The rubric judge passes the answer; a slow scorer runs out of time; `any` completes.
    let judge = scripted(vec![ScriptedResponse::text(
        json!({"passed": true, "score": 1.0, "reason": "it is loud"}).to_string(),
    )]);
    let rubric = RubricScorer::new(judge, ["The answer is in capitals"]);
    let slow = ScorerFn::new("slow", |_task| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(Score {
            scorer: String::new(),
            passed: true,
            score: 1.0,
            reason: None,
        })
    });
    let completion = NetworkCompletion::new()
        .scorer(rubric)
        .scorer(slow)
        .strategy(CompletionStrategy::Any)
        .timeout(Duration::from_millis(200))
        .suppress_feedback(true);
    let (events, result) = agent
        .network("Shout hi")
        .memory(THREAD, RESOURCE)
        .completion(completion)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    let json = wire(&events);
    let check = payload_of(&json, "network-validation-end");
    assert_eq!(check["timedOut"], true);
    assert_eq!(check["suppressFeedback"], true);
    assert_eq!(check["results"][0]["scorerName"], "rubric");
    assert_eq!(check["results"][0]["passed"], true);
    assert_eq!(check["results"][1]["passed"], false);
    assert!(
        check["results"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("did not finish before the completion timeout")
    );
    assert_eq!(
        payload_of(&json, "network-validation-start")["checksCount"],
        2
    );
    // No default check ran (no routing-agent-text-*), and no feedback reached the thread.
    assert!(!types(&events).contains(&"routing-agent-text-start"));
    let thread = thread_texts(&store).await;
    assert!(
        thread
            .iter()
            .all(|(_, text)| !text.starts_with("#### Completion Check Results")),
        "{thread:#?}"
    );
}

async fn an_abort_reaches_the_delegated_agent(store: Store) {
    let router = scripted(vec![route(
        "helper",
        "agent",
        "talk slowly",
        "helper talks",
    )]);
    let helper = scripted(vec![
        ScriptedResponse::text("a very long answer").with_delay(Duration::from_secs(30)),
    ]);
    let kestrel = instance(&store, router, helper, None, false, Arc::default());
    let agent = kestrel.agent("router").unwrap();
    let abort = AbortSignal::new();
    let stream = agent
        .network("Talk")
        .memory(THREAD, RESOURCE)
        .abort_signal(abort.clone())
        .await
        .unwrap();
    let trigger = abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.abort();
    });
    let (events, result) = tokio::time::timeout(Duration::from_secs(10), stream.collect())
        .await
        .expect("the abort stops the network");
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Aborted, "{result:?}");
    let kinds = types(&events);
    assert!(kinds.contains(&"agent-execution-event-abort"), "{kinds:?}");
    assert!(kinds.contains(&"agent-execution-abort"), "{kinds:?}");
    assert!(!kinds.contains(&"agent-execution-end"), "{kinds:?}");
}

#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct Nights {
    nights: u32,
}

async fn a_suspended_workflow_is_resumed_with_the_network_run_id(store: Store) {
    let memory = Memory::builder(Arc::clone(&store)).build().unwrap();
    let ask = create_step("ask")
        .resume_type::<Nights>()
        .execute(|_n: Value, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": "How many nights?"}))),
                Some(data) => Ok(json!({"booked": data["nights"]})),
            }
        });
    let booking = Workflow::builder("booking")
        .description("Books a room")
        .input_schema(json!({"type": "object"}))
        .then(ask)
        .commit()
        .unwrap();
    let router = scripted(vec![
        route("booking", "workflow", "{}", "booking is a workflow"),
        verdict(true, "booked", "Booked for 3 nights."),
    ]);
    let agent = Agent::builder("router")
        .model(router)
        .memory(memory.clone())
        .workflow(booking)
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .memory(memory)
        .agent(agent)
        .build()
        .unwrap();
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network("Book a room")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Suspended, "{result:?}");
    let json = wire(&events);
    let suspended = payload_of(&json, "workflow-execution-suspended");
    assert_eq!(
        keys(suspended),
        set(&[
            "args",
            "workflowId",
            "suspendPayload",
            "resumeSchema",
            "name",
            "runId",
            "usage",
            "selectionReason",
            "toolName",
            "toolCallId"
        ])
    );
    assert_eq!(
        suspended["suspendPayload"],
        json!({"question": "How many nights?"})
    );
    assert!(
        suspended["resumeSchema"]
            .as_str()
            .unwrap()
            .contains("nights")
    );
    let workflow_run = suspended["runId"].as_str().unwrap().to_owned();
    let (events, result) = agent
        .resume_network(&result.run_id, json!({"nights": 3}))
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.result, "Booked for 3 nights.");
    let json = wire(&events);
    let end = payload_of(&json, "workflow-execution-end");
    assert_eq!(
        end["runId"],
        workflow_run.as_str(),
        "the same workflow run went on"
    );
    assert_eq!(end["result"]["result"], json!({"booked": 3}));
}

/// `book`: suspends for `{nights}`, then books.
fn booking_tool() -> kestrel_core::tool::FnTool {
    create_tool("book")
        .description("Books a room")
        .input_schema(json!({"type": "object"}))
        .resume_type::<Nights>()
        .execute(|_input: Value, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": "How many nights?"}))),
                Some(data) => Ok(format!("booked for {} nights", data["nights"])),
            }
        })
}

async fn suspended_tools_in_a_sub_agent_and_in_the_network_are_resumed(store: Store) {
    let memory = Memory::builder(Arc::clone(&store)).build().unwrap();
    // The sub-agent's own tool suspends: agent-execution-suspended.
    let helper = Agent::builder("helper")
        .description("Books rooms")
        .model(scripted(vec![
            ScriptedResponse::tool_call("c1", "book", json!({})),
            ScriptedResponse::text("Booked."),
        ]))
        .tool(booking_tool())
        .build()
        .unwrap();
    let router = scripted(vec![
        route("helper", "agent", "book a room", "helper books"),
        verdict(true, "booked", ""),
        route("book", "tool", "{}", "the network books itself"),
        verdict(true, "booked", ""),
    ]);
    let agent = Agent::builder("router")
        .model(router)
        .memory(memory.clone())
        .agents([helper])
        .tool(booking_tool())
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .memory(memory)
        .agent(agent)
        .build()
        .unwrap();
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network("Book a room")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Suspended, "{result:?}");
    let json = wire(&events);
    let suspended = payload_of(&json, "agent-execution-suspended");
    assert_eq!(
        suspended["suspendPayload"],
        json!({"question": "How many nights?"})
    );
    assert!(
        suspended["resumeSchema"]
            .as_str()
            .unwrap()
            .contains("nights")
    );
    let (events, result) = agent
        .resume_network(&result.run_id, json!({"nights": 2}))
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.result, "Booked.");
    let json = wire(&events);
    let tool_result = payload_of(&json, "agent-execution-event-tool-result");
    assert_eq!(tool_result["payload"]["result"], "booked for 2 nights");

    // The network's own tool suspends: tool-execution-suspended.
    let (events, result) = agent
        .network("Book another room")
        .memory("net-thread-2", RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Suspended, "{result:?}");
    let json = wire(&events);
    let suspended = payload_of(&json, "tool-execution-suspended");
    assert_eq!(
        keys(suspended),
        set(&[
            "toolName",
            "toolCallId",
            "args",
            "selectionReason",
            "runId",
            "resumeSchema",
            "suspendPayload"
        ])
    );
    let call = suspended["toolCallId"].as_str().unwrap().to_owned();
    let (events, result) = agent
        .resume_network(&result.run_id, json!({"nights": 3}))
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    let json = wire(&events);
    let end = payload_of(&json, "tool-execution-end");
    assert_eq!(end["result"], "booked for 3 nights");
    assert_eq!(end["toolCallId"], call.as_str(), "the same call went on");
}

async fn a_network_needs_memory_and_a_thread(store: Store) {
    let _ = store;
    let bare = Agent::builder("bare")
        .model(scripted(vec![]))
        .agents([Agent::builder("helper")
            .model(scripted(vec![]))
            .build()
            .unwrap()])
        .build()
        .unwrap();
    let refused = bare.network("Hi").memory(THREAD, RESOURCE).await;
    assert!(
        matches!(refused, Err(NetworkError::MemoryRequired { .. })),
        "{refused:?}"
    );
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("AgentBuilder::memory"), "{message}");
    let kestrel = instance(
        &store,
        scripted(vec![]),
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    );
    let agent = kestrel.agent("router").unwrap();
    let refused = agent.network("Hi").await;
    assert!(
        matches!(refused, Err(NetworkError::ThreadRequired { .. })),
        "{refused:?}"
    );
    let refused = agent
        .network("Hi")
        .memory(THREAD, RESOURCE)
        .max_steps(0)
        .await;
    assert!(
        matches!(refused, Err(NetworkError::ZeroMaxSteps)),
        "{refused:?}"
    );
    let unknown = agent.approve_network("no-such-run").await;
    assert!(
        matches!(unknown, Err(NetworkError::NotFound { .. })),
        "{unknown:?}"
    );
}

on_every_backend!(
    an_agent_delegation_streams_mastras_events,
    a_workflow_then_a_tool_then_none,
    a_prompt_that_does_not_fit_is_reported_to_the_router,
    an_approval_in_a_delegated_agent_is_decided_with_the_network_run_id,
    a_network_tool_that_needs_approval_can_be_declined,
    scorers_decide_and_their_feedback_reaches_the_router,
    an_abort_reaches_the_delegated_agent,
    the_rubric_scorer_any_strategy_timeout_and_suppressed_feedback,
    a_suspended_workflow_is_resumed_with_the_network_run_id,
    suspended_tools_in_a_sub_agent_and_in_the_network_are_resumed,
    a_network_needs_memory_and_a_thread,
);
