//! The chaos run: 200 conversations over three `kestrel dev` processes while one at a time is
//! killed with `-9` and started again; at the end every thread is complete and nothing is
//! stored twice. Needs `KESTREL_TEST_POSTGRES_URL` and `KESTREL_TEST_REDIS_URL`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{FakeServer, Instance, RESOURCE, Services, assert_each_once};

/// How many conversations the chaos run holds, and how long instances are being killed.
const CHAOS_CONVERSATIONS: usize = 200;
const CHAOS_SECONDS: u64 = 60;

/// The base URLs of the instances up now (`None` while one is down).
type Live = Arc<Mutex<Vec<Option<String>>>>;

/// One conversation of the chaos run, driven from what its thread holds: ask for an email
/// (the run stops for approval), approve it, say hi; every request to whichever instance is
/// up, each turn with a run id of its own so a retry can never start it twice.
async fn converse(live: Live, thread: String, seed: usize) -> Duration {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let deadline = started + Duration::from_secs(CHAOS_SECONDS + 90);
    let mut attempt = seed;
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "conversation {thread} did not complete"
        );
        attempt += 1;
        let base = {
            let live = live.lock().unwrap();
            let up: Vec<String> = live.iter().flatten().cloned().collect();
            if up.is_empty() {
                None
            } else {
                Some(up[attempt % up.len()].clone())
            }
        };
        let Some(base) = base else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let api = |path: &str| format!("{base}/api{path}");
        let messages: Vec<Value> = match client
            .get(api(&format!(
                "/memory/threads/{thread}/messages?agentId=assistant&resourceId={RESOURCE}"
            )))
            .send()
            .await
        {
            Ok(r) if r.status() == 200 => match r.json::<Value>().await {
                Ok(v) => crate::as_stored(v["messages"].as_array().map_or(&[][..], Vec::as_slice)),
                Err(_) => continue,
            },
            Ok(r) if r.status() == 404 => Vec::new(),
            _ => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        let body = |text: &str, run: &str| json!({"messages": text, "memory": {"thread": thread, "resource": RESOURCE}, "runId": run});
        let sent = match roles.as_slice() {
            [] => client
                .post(api("/agents/assistant/generate"))
                .json(&body("email bob, patiently", &format!("{thread}-1")))
                .send()
                .await
                .is_ok(),
            ["user", "assistant"] => {
                // Stopped for approval, or still running (being taken over).
                let waiting: Value = match client
                    .get(api(&format!(
                        "/agents/assistant/suspended-runs?threadId={thread}&resourceId={RESOURCE}"
                    )))
                    .send()
                    .await
                {
                    Ok(r) => r.json().await.unwrap_or(Value::Null),
                    Err(_) => Value::Null,
                };
                let suspended = waiting["runs"]
                    .as_array()
                    .is_some_and(|runs| !runs.is_empty());
                suspended
                    && client
                        .post(api("/agents/assistant/approve-tool-call-generate"))
                        .json(&json!({"runId": format!("{thread}-1"), "toolCallId": "call-email"}))
                        .send()
                        .await
                        .is_ok()
            }
            ["user", "assistant", "tool", "assistant"] => client
                .post(api("/agents/assistant/generate"))
                .json(&body("hi, patiently", &format!("{thread}-2")))
                .send()
                .await
                .is_ok(),
            [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
            ] => {
                return started.elapsed();
            }
            // A turn in progress.
            _ => false,
        };
        if !sent {
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_loses_and_duplicates_nothing() {
    let Some(services) = Services::from_env("a_chaos_run_loses_and_duplicates_nothing") else {
        return;
    };
    let model = FakeServer::start().await;
    let ids = ["a", "b", "c"];
    let mut instances = Vec::new();
    for id in ids {
        instances.push(Some(Instance::start(&services, &model, id).await));
    }
    let live: Live = Arc::new(Mutex::new(
        instances
            .iter()
            .map(|i| i.as_ref().map(|i| i.base.clone()))
            .collect(),
    ));
    let began = std::time::Instant::now();
    let conversations: Vec<_> = (0..CHAOS_CONVERSATIONS)
        .map(|n| {
            let live = live.clone();
            tokio::spawn(async move {
                // Spread over the first part of the run.
                tokio::time::sleep(Duration::from_millis(n as u64 * 150)).await;
                converse(live, format!("chaos-{n}"), n).await
            })
        })
        .collect();

    // One instance at a time is killed (-9) and started again, until the time is up.
    let mut kills = 0;
    let mut victim = 0;
    while began.elapsed() < Duration::from_secs(CHAOS_SECONDS) {
        tokio::time::sleep(Duration::from_secs(8)).await;
        live.lock().unwrap()[victim] = None;
        if let Some(instance) = instances[victim].take() {
            instance.kill().await;
            kills += 1;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let restarted = Instance::start(&services, &model, ids[victim]).await;
        live.lock().unwrap()[victim] = Some(restarted.base.clone());
        instances[victim] = Some(restarted);
        victim = (victim + 1) % ids.len();
    }

    let mut longest = Duration::ZERO;
    for conversation in conversations {
        longest = longest.max(conversation.await.unwrap());
    }
    let total = began.elapsed();

    // Every thread is complete, each message once, the approved tool run once.
    let checker = instances.iter().flatten().next().unwrap();
    for n in 0..CHAOS_CONVERSATIONS {
        let listed = checker
            .get(&format!(
                "/memory/threads/chaos-{n}/messages?agentId=assistant&resourceId={RESOURCE}"
            ))
            .await;
        let messages =
            crate::as_stored(listed["messages"].as_array().map_or(&[][..], Vec::as_slice));
        assert_each_once(&messages);
        let tools = messages.iter().filter(|m| m["role"] == "tool").count();
        assert_eq!(tools, 1, "chaos-{n}: {messages:#?}");
        assert!(
            messages.last().unwrap()["parts"]
                .to_string()
                .contains("Hello there"),
            "chaos-{n}: {messages:#?}"
        );
    }
    eprintln!(
        "chaos run: {CHAOS_CONVERSATIONS} conversations (two turns and an approval each) over 3 instances, \
         {kills} kill -9 and restarts in {total:?}; the slowest conversation took {longest:?}; \
         {} model requests for {} model steps (the rest ran again after a takeover); \
         nothing lost or duplicated",
        model.requests(),
        CHAOS_CONVERSATIONS * 3
    );
    for instance in instances.into_iter().flatten() {
        instance.kill().await;
    }
    services.teardown().await;
}
