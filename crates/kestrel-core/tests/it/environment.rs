//! One environment per instance: the storage is given once (overrides on the builder win,
//! nothing else decides), and the instance's model registry serves its agents' dynamic models.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::{Agent, AgentError};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{
    FinishReason, ModelRegistry, ModelSpec, ScriptedModel, ScriptedResponse, SharedModel,
};
use kestrel_core::store::{InMemoryRunStore, RunPhase, RunStore, Stores};
use kestrel_core::tool::create_tool;
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Email {
    to: String,
}

/// An agent whose only tool needs approval, so its runs stop and are saved.
fn mailer() -> Agent {
    Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::new().respond(
            ScriptedResponse::tool_call("call-1", "send_email", json!({"to": "bob"})),
        )))
        .tool(
            create_tool("send_email")
                .description("Sends an email")
                .require_approval(true)
                .execute(|email: Email, _ctx| async move { Ok(format!("sent to {}", email.to)) }),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_instance_saves_runs_in_the_storage_it_was_given() {
    let runs = Arc::new(InMemoryRunStore::new());
    let kestrel = Kestrel::builder()
        .storage(Stores::in_memory().with_runs(runs.clone()))
        .agent(mailer())
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    let agent = kestrel.agent("mailer").unwrap();
    let result = agent.generate("email bob").await.unwrap();
    assert_eq!(result.finish_reason, FinishReason::Suspended);
    let stored = runs
        .load(&result.run_id)
        .await
        .unwrap()
        .expect("saved there");
    assert_eq!(stored.phase, RunPhase::Suspended);
    for (seen_by, store) in [
        ("the instance", kestrel.run_store()),
        ("its agent", agent.run_store()),
        ("its agent's stores", &agent.stores().runs),
    ] {
        assert!(
            store.load(&result.run_id).await.unwrap().is_some(),
            "{seen_by} sees the storage's run store"
        );
    }
}

#[tokio::test]
async fn a_run_store_given_to_the_instance_stands_over_its_storage() {
    let storage_runs = Arc::new(InMemoryRunStore::new());
    let own = Arc::new(InMemoryRunStore::new());
    let kestrel = Kestrel::builder()
        .storage(Stores::in_memory().with_runs(storage_runs.clone()))
        .run_store(own.clone())
        .agent(mailer())
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    let result = kestrel
        .agent("mailer")
        .unwrap()
        .generate("email bob")
        .await
        .unwrap();
    assert!(own.load(&result.run_id).await.unwrap().is_some());
    assert!(storage_runs.load(&result.run_id).await.unwrap().is_none());
}

#[tokio::test]
async fn an_agent_on_its_own_saves_runs_in_its_builders_storage() {
    let runs = Arc::new(InMemoryRunStore::new());
    let agent = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::new().respond(
            ScriptedResponse::tool_call("call-1", "send_email", json!({"to": "bob"})),
        )))
        .tool(
            create_tool("send_email")
                .require_approval(true)
                .execute(|email: Email, _ctx| async move { Ok(format!("sent to {}", email.to)) }),
        )
        .storage(Stores::in_memory().with_runs(runs.clone()))
        .build()
        .unwrap();
    let result = agent.generate("email bob").await.unwrap();
    assert!(runs.load(&result.run_id).await.unwrap().is_some());
    // Registered in an instance, it runs with the instance's storage instead.
    let kestrel = Kestrel::builder()
        .agent(agent)
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    let in_instance = kestrel.agent("mailer").unwrap();
    assert!(!Arc::ptr_eq(
        &(runs.clone() as kestrel_core::store::SharedRunStore),
        in_instance.run_store()
    ));
}

#[tokio::test]
async fn without_memory_or_store_the_instance_keeps_runs_in_process() {
    let kestrel = Kestrel::builder()
        .agent(mailer())
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    assert!(kestrel.memory().is_none());
    let result = kestrel
        .agent("mailer")
        .unwrap()
        .generate("email bob")
        .await
        .unwrap();
    assert!(
        kestrel
            .run_store()
            .load(&result.run_id)
            .await
            .unwrap()
            .is_some()
    );
}

/// An agent whose model string is chosen per run, with no registry of its own.
fn dynamic(id: &str) -> Agent {
    Agent::builder(id)
        .model_fn(|_ctx| async { Ok(ModelSpec::Id("house/echo".into())) })
        .build()
        .unwrap()
}

fn house_registry() -> ModelRegistry {
    let mut registry = ModelRegistry::empty();
    registry.register("house", |_model: &str, _spec: &str| {
        let model: SharedModel = Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("from the house")
        }));
        Ok(model)
    });
    registry
}

#[tokio::test]
async fn dynamic_models_resolve_in_the_instances_registry() {
    let kestrel = Kestrel::builder()
        .agent(dynamic("chooser"))
        .models(house_registry())
        .build()
        .unwrap();
    let result = kestrel
        .agent("chooser")
        .unwrap()
        .generate("hi")
        .await
        .unwrap();
    assert_eq!(result.text, "from the house");

    // On its own the agent has only the environment's providers: `house` is not one.
    let err = dynamic("alone").generate("hi").await.unwrap_err();
    assert!(matches!(err, AgentError::ModelResolution { .. }), "{err:?}");
}

#[tokio::test]
async fn an_agents_own_registry_stands_over_the_instances() {
    let own = Agent::builder("own")
        .model_fn(|_ctx| async { Ok(ModelSpec::Id("house/echo".into())) })
        .registry(house_registry())
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .agent(own)
        .models(ModelRegistry::empty())
        .build()
        .unwrap();
    let result = kestrel.agent("own").unwrap().generate("hi").await.unwrap();
    assert_eq!(result.text, "from the house");
}
