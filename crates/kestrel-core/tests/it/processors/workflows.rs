//! A processor as a workflow step, and a tripwire ending a workflow run `tripwire`.
use super::*;
use crate::workflow::{json_of, streamed};
use kestrel_core::agent::AgentStep;
use kestrel_core::workflow::{ProcessorStep, Workflow, WorkflowStatus, create_step};

fn after_runs(runs: Arc<AtomicUsize>) -> impl kestrel_core::workflow::IntoStep {
    create_step("after").execute(move |input: Value, _ctx| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(input)
        }
    })
}

#[tokio::test]
async fn a_processor_step_rewrites_messages_or_stops_the_run_with_a_tripwire() {
    let runs = Arc::new(AtomicUsize::new(0));
    let workflow = Workflow::builder("screen")
        .then(ProcessorStep::input(Rewriter))
        .then(ProcessorStep::input(BlockWord("password")))
        .then(after_runs(Arc::clone(&runs)))
        .commit()
        .unwrap();
    let (_, result) = streamed(
        &workflow,
        json!({"messages": ["my colour", {"role": "user", "parts": [{"type": "text", "text": "is blue"}]}]}),
    )
    .await;
    assert_eq!(result.status, WorkflowStatus::Success, "{result:?}");
    let messages = &result.result.as_ref().unwrap()["messages"];
    assert_eq!(messages[0]["parts"][0]["text"], "my color");
    assert_eq!(messages[1]["parts"][0]["text"], "is blue");
    assert!(result.steps.contains_key("processor:rewriter"));

    let (events, result) = streamed(&workflow, json!({"messages": ["my password is x"]})).await;
    assert_eq!(result.status, WorkflowStatus::Tripwire, "{result:?}");
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.name, "TripWire");
    assert_eq!(error.message, "the input mentions \"password\"");
    let tripwire = error.tripwire.as_ref().unwrap();
    assert_eq!(tripwire.processor_id.as_deref(), Some("block-word"));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the step after never ran again"
    );
    let json = json_of(&events);
    let finish = json.last().unwrap();
    assert_eq!(finish["type"], "workflow-finish");
    assert_eq!(finish["payload"]["workflowStatus"], "tripwire");
    let step = result.steps.get("processor:block-word").unwrap();
    assert_eq!(step.error.as_ref().unwrap().name, "TripWire");
}

#[tokio::test]
async fn an_output_processor_step_checks_an_answer() {
    let workflow = Workflow::builder("check")
        .then(ProcessorStep::output(guard()))
        .commit()
        .unwrap();
    let (_, result) = streamed(&workflow, json!({"text": "mail bob@example.com"})).await;
    assert_eq!(result.result, Some(json!({"text": "mail [email]"})));
    let (_, result) = streamed(&workflow, json!({"text": "key sk-live-1"})).await;
    assert_eq!(result.status, WorkflowStatus::Tripwire);
}

#[tokio::test]
async fn an_agent_steps_tripwire_ends_the_workflow_run_tripwire() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder("leaky")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("the key is sk-live-42")
        })))
        .output_processor(guard())
        .build()
        .unwrap();
    let workflow = Workflow::builder("ask")
        .then(AgentStep::new(agent))
        .then(after_runs(Arc::clone(&runs)))
        .commit()
        .unwrap();
    let (events, result) = streamed(&workflow, json!({"prompt": "the key?"})).await;
    assert_eq!(result.status, WorkflowStatus::Tripwire, "{result:?}");
    assert_eq!(
        result
            .error
            .unwrap()
            .tripwire
            .unwrap()
            .processor_id
            .as_deref(),
        Some("secret-guard")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let wire = serde_json::to_string(&json_of(&events)).unwrap();
    assert!(!wire.contains("sk-live"), "{wire}");
    assert!(
        wire.contains("\"type\":\"tripwire\""),
        "the agent's event is in the stream"
    );
}
