//! A network's events in Mastra's shapes, field by field, and a prompt that does not fit a
//! workflow's schema reported back to the router.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

pub(super) async fn an_agent_delegation_streams_mastras_events(store: Store) {
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

pub(super) async fn a_workflow_then_a_tool_then_none(store: Store) {
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

pub(super) async fn a_prompt_that_does_not_fit_is_reported_to_the_router(store: Store) {
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
