//! Agent networks end to end on each store: the events of an agent, a workflow and a tool
//! delegation in Mastra's shapes, a prompt that does not fit reported to the router, memory
//! required, an approval inside a delegated agent decided with the network's run id after a
//! restart, a network tool declined, scorers with feedback, and an abort reaching the
//! sub-agent. This module holds the agents and helpers the scenarios share (events.rs,
//! decisions.rs, completion.rs).

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
use kestrel_storage::Selection;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use serde_json::{Value, json};

use super::fixture::Instance;

mod completion;
mod decisions;
mod events;
mod guarded;
mod recovery;
mod retrieval;
mod traced;

use completion::*;
use decisions::*;
use events::*;
use guarded::*;
use recovery::*;
use retrieval::*;
use traced::*;

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
    let mut helper_agent = Agent::builder("helper")
        .description("Greets people")
        .model(helper);
    if let Some(tool) = helper_tool {
        helper_agent = helper_agent.tool(tool);
    }
    let network = Agent::builder("router")
        .instructions("Greet, double and shout as asked.")
        .model(router)
        .agents([helper_agent.build().unwrap()])
        .workflow(doubler())
        .tool(shout(shout_approval, shouts));
    Instance::on(store).agent(network).build()
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
    let unknown = agent.run("no-such-run").network().approve().await;
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
    a_traced_network_run_is_a_tree_of_its_iterations,
    a_traced_runs_memory_reads_and_writes_are_spans,
    a_network_iteration_whose_routing_fails_is_a_failed_span,
    the_vector_query_tool_is_a_network_primitive,
    a_guardrail_in_a_delegated_agent_stops_the_network,
    the_network_agents_input_guardrail_stops_the_routing,
);

// The durable backends only: the in-memory one keeps no snapshot of a run mid-way.
on_every_backend!(@backend sqlite_store_recovery, sqlite;
    a_network_run_left_behind_is_ended_with_its_reason,
    a_network_run_left_behind_is_aborted_by_its_id
);
on_every_backend!(@backend postgres_store_recovery, postgres;
    a_network_run_left_behind_is_ended_with_its_reason,
    a_network_run_left_behind_is_aborted_by_its_id
);
