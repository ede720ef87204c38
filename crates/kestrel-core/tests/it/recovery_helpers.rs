//! The recovery sweep of a cluster and the runs of the framework's own helper agents: a
//! network's routing agent run left `running` by an instance that stopped is retried by the
//! network under a new run, so the sweep ends the old one as aborted instead of leaving it
//! open for ever; a run of an agent no instance knows is left as it is.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::cluster::Cluster;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ModelRegistry, ScriptedModel};
use kestrel_core::network::ROUTING_AGENT_ID;
use kestrel_core::run::{RunPhase, RunSettings, RunState};
use kestrel_core::store::{InMemoryRunStore, RunStore, SharedRunStore};

#[tokio::test]
async fn an_abandoned_routing_agent_run_is_closed_as_aborted() {
    let store = Arc::new(InMemoryRunStore::new());
    let agent = Agent::builder("planner")
        .model(Arc::new(ScriptedModel::new()))
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .agent(agent)
        .models(ModelRegistry::empty())
        .run_store(Arc::clone(&store) as SharedRunStore)
        .cluster(
            Cluster::in_process()
                .lease_ttl(Duration::from_millis(100))
                .sweep_interval(Duration::from_secs(3600)),
        )
        .build()
        .unwrap();
    for (run_id, agent_id) in [("check-1", ROUTING_AGENT_ID), ("other-1", "retired-agent")] {
        let state = RunState::new(
            run_id.to_owned(),
            agent_id.to_owned(),
            Vec::new(),
            1,
            RunSettings::default(),
        );
        store.save(&state, RunPhase::Running, None).await.unwrap();
    }
    // Not yet abandoned: its lease could still be held.
    kestrel.recover_runs().await;
    let fresh = store.load("check-1").await.unwrap().unwrap();
    assert_eq!(fresh.phase, RunPhase::Running);

    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = kestrel.recover_runs().await;
    assert!(taken.is_empty(), "nothing is taken over: {taken:?}");
    let closed = store.load("check-1").await.unwrap().unwrap();
    assert_eq!(closed.phase, RunPhase::Aborted);
    assert_eq!(closed.version, 2);
    let unknown = store.load("other-1").await.unwrap().unwrap();
    assert_eq!(
        unknown.phase,
        RunPhase::Running,
        "an unknown agent's run is left"
    );
}
