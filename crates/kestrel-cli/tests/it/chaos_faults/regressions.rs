//! The two product bugs the chaos run found, each reproduced on its own (quiet, two instances)
//! so that a return of either fails here, in a few seconds, with a plain message.

use super::*;

/// Instances `a` and `b` of `kestrel dev` on fresh services, their ledgers in one folder.
struct TwoNodes {
    services: Services,
    /// Kept alive: the instances' model.
    _model: FakeServer,
    ledgers: tempfile::TempDir,
    a: Node,
    b: Node,
    on_a: String,
    on_b: String,
}

impl TwoNodes {
    async fn start(name: &str) -> Option<Self> {
        let services = Services::from_env(name)?;
        let model = FakeServer::start().await;
        let ledgers = tempfile::tempdir().unwrap();
        let (mut a, mut b) = (
            Node::new("a", &services).await,
            Node::new("b", &services).await,
        );
        let on_a = a.start(&services, &model, ledgers.path()).await;
        let on_b = b.start(&services, &model, ledgers.path()).await;
        Some(Self {
            services,
            _model: model,
            ledgers,
            a,
            b,
            on_a,
            on_b,
        })
    }

    async fn stop(self) {
        for node in [self.a, self.b] {
            node.process.unwrap().kill().await;
        }
        self.services.teardown().await;
    }
}

/// A network's workflow primitive ran under the agent's own copy of the workflow, which had
/// no cluster: its run took no lease and was stored `running` under `weather-report` in the
/// shared store, where every other instance's sweep (which restarts `weather-report` runs
/// left `running` whose lease is free) took it over while the network still drove it, so on
/// a quiet cluster of two instances the workflow's steps ran on both. Now the primitive's run
/// is leased in the instance's cluster. Three network runs on instance `a`: each step of each
/// of their workflow runs runs once, on `a`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_s_workflow_run_is_driven_by_one_instance() {
    let Some(two) = TwoNodes::start("a_network_s_workflow_run_is_driven_by_one").await else {
        return;
    };
    let base = two.on_a.clone();
    let client = http(Duration::from_secs(60));
    for n in 0..3 {
        let thread = format!("net-{n}");
        let body = json!({"messages": "weather report for Quito", "runId": thread,
            "memory": {"thread": thread, "resource": RESOURCE}});
        let post = client
            .post(format!("{base}/api/agents/coordinator/network"))
            .json(&body);
        let events = post.send().await.unwrap().text().await.unwrap();
        assert!(
            events.contains("network-execution-event-finish"),
            "{events}"
        );
    }
    // Longer than a sweep interval and a lease: a restart would have run by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let effects = read_ledgers(two.ledgers.path());
    let done = counts(&effects);
    assert_eq!(done.len(), 3 * 4, "four steps of three runs: {effects:#?}");
    let twice: Vec<&Effect> = effects
        .iter()
        .filter(|e| done[&(e.kind.clone(), e.run.clone(), e.id.clone())] > 1)
        .collect();
    assert!(twice.is_empty(), "steps ran twice: {twice:#?}");
    assert!(
        effects.iter().all(|e| e.instance.starts_with("a/")),
        "{effects:#?}"
    );
    two.stop().await;
}

/// docs/scaling.md says an agent run whose save fails stops with a storage error, its last
/// stored boundary kept, from which it is resumed once the database is back. It used to record
/// its end as soon as the database was back: stored `failed`, the run was refused by
/// `POST /agents/{id}/runs/{runId}/resume` (409, "it is finished") and the turn's question
/// stayed in the thread, unanswered. Here instance `a`'s PostgreSQL answers are dropped for
/// 4 s from when its turn's model step (1.5 s) starts (the step's message save waits on a
/// connection caught in the fault, and fails after the pool's timeout); the turn ends
/// answered (the sweep continues it once its lease has run out), or, were it stored failed,
/// is resumable on `b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_save_was_lost_can_be_resumed() {
    let Some(two) = TwoNodes::start("a_turn_whose_save_was_lost_can_be_resumed").await else {
        return;
    };
    let (services, on_a, on_b) = (&two.services, two.on_a.clone(), two.on_b.clone());
    let store = PostgresStorage::connect(&services.postgres, PgOptions::schema(&services.schema))
        .await
        .unwrap();
    let run_id = "lost-save";
    let body = json!({"messages": "weather in Oslo, patiently", "runId": run_id,
        "memory": {"thread": run_id, "resource": RESOURCE}});
    let turn = http(Duration::from_secs(120))
        .post(format!("{on_a}/api/agents/assistant/generate"))
        .json(&body)
        .send();
    let turn = tokio::spawn(turn);
    // Once the run is stored (its start), while its first model step (1.5 s) runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.get_run(run_id).await.unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run was never stored");
        pause(50).await;
    }
    two.a.postgres.set(Fault::DropAnswers);
    // Past the model step's end, so its message save is caught in the fault.
    pause(4_000).await;
    two.a.postgres.set(Fault::None);
    // The fault reached the turn: its client was told of the storage error.
    let told = turn.await.unwrap().unwrap();
    assert!(!told.status().is_success(), "{told:?}");
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut resumed = None;
    loop {
        let status = store.get_run(run_id).await.unwrap().unwrap().status;
        match status {
            RunPhase::Completed => break,
            RunPhase::Failed if resumed.is_none() => {
                let post = http(Duration::from_secs(60))
                    .post(format!("{on_b}/api/agents/assistant/runs/{run_id}/resume"))
                    .json(&json!({}));
                let answered = answer(post).await;
                assert_eq!(
                    answered.as_ref().map(|(status, _)| *status),
                    Some(200),
                    "the failed run could not be resumed: {answered:?}"
                );
                resumed = answered;
            }
            _ => {}
        }
        assert!(Instant::now() < deadline, "the run is {status:?}");
        pause(500).await;
    }
    let messages = thread_messages(
        &Live(Arc::new(Mutex::new(vec![Some(on_b)]))),
        "assistant",
        run_id,
    )
    .await;
    assert_eq!(roles(&messages), TURN, "{messages:#?}");
    two.stop().await;
}
