//! People in the loop and aborts: approvals, declines and suspensions inside a delegated
//! agent, a workflow or the network's tool, decided with the network's run id (also from
//! another instance), and an abort reaching the sub-agent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct Nights {
    nights: u32,
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

pub(super) async fn an_approval_in_a_delegated_agent_is_decided_with_the_network_run_id(
    store: Store,
) {
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
    // Through the run's handle, as a network run.
    let (events, result) = agent
        .run(&run_id)
        .network()
        .approve()
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
    let again = agent.run(&run_id).network().approve().await;
    assert!(
        matches!(again, Err(NetworkError::NotFound { .. })),
        "{again:?}"
    );
}

pub(super) async fn a_network_tool_that_needs_approval_can_be_declined(store: Store) {
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
        .run(&result.run_id)
        .network()
        .decline(Some("too loud".into()))
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

pub(super) async fn an_abort_reaches_the_delegated_agent(store: Store) {
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

pub(super) async fn a_suspended_workflow_is_resumed_with_the_network_run_id(store: Store) {
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
    let agent = Agent::builder("router").model(router).workflow(booking);
    let kestrel = Instance::on(&store).agent(agent).build();
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
        .run(&result.run_id)
        .network()
        .resume(json!({"nights": 3}))
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

pub(super) async fn suspended_tools_in_a_sub_agent_and_in_the_network_are_resumed(store: Store) {
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
        .agents([helper])
        .tool(booking_tool());
    let kestrel = Instance::on(&store).agent(agent).build();
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
        .run(&result.run_id)
        .network()
        .resume(json!({"nights": 2}))
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
        .run(&result.run_id)
        .network()
        .resume(json!({"nights": 3}))
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
