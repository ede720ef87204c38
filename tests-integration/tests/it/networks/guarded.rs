//! A network stopped by a guardrail: a delegated agent's output processor, or the network
//! agent's own input processor (its routing agent meets it), ends the network with the status
//! `tripwire`, a `tripwire` event from NETWORK, and nothing of the blocked text anywhere.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kestrel_processors::{FilterStrategy, Preset, RegexFilter};

use super::*;

const KEY: &str = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";

fn blocking() -> RegexFilter {
    RegexFilter::new()
        .preset(Preset::Secrets)
        .strategy(FilterStrategy::Block)
}

pub(super) async fn a_guardrail_in_a_delegated_agent_stops_the_network(store: Store) {
    let router = scripted(vec![
        route("helper", "agent", "find the key", "helper knows"),
        verdict(true, "done", ""),
    ]);
    let helper = Agent::builder("helper")
        .description("Knows keys")
        .model(scripted(vec![ScriptedResponse::text(format!(
            "it is {KEY}"
        ))]))
        .output_processor(blocking())
        .build()
        .unwrap();
    let network = Agent::builder("router")
        .instructions("Ask the helper.")
        .model(router)
        .agents([helper]);
    let kestrel = Instance::on(&store).agent(network).build();
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network("What is the key?")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Tripwire, "{result:?}");
    let tripwire = result.tripwire.as_ref().unwrap();
    assert_eq!(tripwire.processor_id.as_deref(), Some("regex-filter"));
    assert_eq!(
        result.error.as_deref(),
        Some("the answer matched openai-api-key")
    );
    let kinds = types(&events);
    assert!(
        kinds.contains(&"agent-execution-event-tripwire"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"tripwire"), "{kinds:?}");
    let last = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(last["from"], "NETWORK");
    assert!(!serde_json::to_string(&events).unwrap().contains("sk-proj"));
    let stored = thread_texts(&store).await;
    assert!(
        !stored.iter().any(|(_, text)| text.contains("sk-proj")),
        "{stored:?}"
    );
}

pub(super) async fn the_network_agents_input_guardrail_stops_the_routing(store: Store) {
    let router = scripted(vec![route("helper", "agent", "x", "y")]);
    let helper = Agent::builder("helper")
        .description("Helps")
        .model(scripted(vec![]))
        .build()
        .unwrap();
    let network = Agent::builder("router")
        .model(router.clone())
        .agents([helper])
        .input_processor(blocking());
    let kestrel = Instance::on(&store).agent(network).build();
    let agent = kestrel.agent("router").unwrap();
    let (events, result) = agent
        .network(format!("store this: {KEY}"))
        .memory(THREAD, RESOURCE)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Tripwire, "{result:?}");
    assert_eq!(router.calls(), 0, "the routing model never saw the task");
    assert_eq!(types(&events).last(), Some(&"tripwire"));
}
