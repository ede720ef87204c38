//! `kestrel dev`: the demo instance keeps a waiting run across a restart, and the binary
//! refuses to serve beyond loopback without a token, saying why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel::model::ModelSpec;
use kestrel::prelude::*;
use kestrel::store::SuspendedRunsQuery;
use kestrel_cli::dev;
use serde_json::json;

fn model() -> ModelSpec {
    ModelSpec::Model(Arc::new(ScriptedModel::from_fn(|req| {
        if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
            ScriptedResponse::text("Sent.")
        } else {
            ScriptedResponse::tool_call(
                "call-1",
                dev::EMAIL_TOOL,
                json!({"to": "bob@example.com", "subject": "Hi"}),
            )
        }
    })))
}

#[tokio::test]
async fn a_run_waiting_for_approval_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.db");

    let storage = dev::open_storage(&path).await.unwrap();
    let kestrel = dev::demo_kestrel(model(), Arc::new(storage.clone())).unwrap();
    let stopped = kestrel
        .agent(dev::ASSISTANT)
        .unwrap()
        .generate("Email Bob")
        .memory("thread-1", "studio")
        .await
        .unwrap();
    assert_eq!(stopped.waiting.len(), 1, "{stopped:?}");
    drop(kestrel);
    storage.close().await;

    let storage = dev::open_storage(&path).await.unwrap();
    let kestrel = dev::demo_kestrel(model(), Arc::new(storage.clone())).unwrap();
    let agent = kestrel.agent(dev::ASSISTANT).unwrap();
    let waiting = agent
        .list_suspended_runs(SuspendedRunsQuery {
            thread_id: Some("thread-1".into()),
            ..SuspendedRunsQuery::default()
        })
        .await
        .unwrap();
    let run = waiting
        .runs
        .first()
        .expect("the waiting run is listed after the restart");
    assert_eq!(run.run_id, stopped.run_id);
    let call = &run.tool_calls[0];
    let done = agent
        .run(&run.run_id)
        .approve(&call.tool_call_id)
        .await
        .unwrap();
    assert_eq!(done.text, "Sent.");
    storage.close().await;
}

#[tokio::test]
async fn the_demo_has_its_agents_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dev::open_storage(&dir.path().join("a/b/dev.db"))
        .await
        .unwrap();
    let kestrel = dev::demo_kestrel(model(), Arc::new(storage.clone())).unwrap();
    let ids: Vec<&str> = kestrel.agents().map(|a| a.id()).collect();
    assert_eq!(
        ids,
        [
            dev::ASSISTANT,
            dev::COORDINATOR,
            dev::RESEARCH,
            dev::SUPERVISOR,
            dev::WRITING
        ]
    );
    let assistant = kestrel.agent(dev::ASSISTANT).unwrap();
    for tool in [dev::WEATHER_TOOL, dev::EMAIL_TOOL, dev::BOOKING_TOOL] {
        assert!(assistant.tools().get(tool).is_some(), "no {tool}");
    }
    let booking = assistant.tools().get(dev::BOOKING_TOOL).unwrap();
    assert!(booking.resume_schema().is_some());
    assert_eq!(
        kestrel.agent(dev::SUPERVISOR).unwrap().sub_agent_ids(),
        [dev::RESEARCH, dev::WRITING]
    );
    // The demo network: the two agents, the weather-report workflow and the weather tool.
    let coordinator = kestrel.agent(dev::COORDINATOR).unwrap();
    assert_eq!(coordinator.sub_agent_ids(), [dev::RESEARCH, dev::WRITING]);
    let workflows: Vec<String> = coordinator
        .workflows()
        .iter()
        .map(|w| w.id().to_owned())
        .collect();
    assert_eq!(workflows, ["weather-report"]);
    assert!(coordinator.tools().get(dev::WEATHER_TOOL).is_some());
    assert!(coordinator.memory().is_some());
    storage.close().await;
}

#[tokio::test]
async fn the_server_serves_the_studio_and_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dev::open_storage(&dir.path().join("dev.db")).await.unwrap();
    let kestrel = dev::demo_kestrel(model(), Arc::new(storage.clone())).unwrap();
    let memory = dev::demo_memory().unwrap();
    let server = dev::server(kestrel, memory).unwrap();
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let serving = tokio::spawn(server.serve_on(listener, addr));
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("http://{addr}{path}")).send();

    let page = get("/").await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>Kestrel Studio</title>"), "{html}");
    let style = get("/studio/studio.css").await.unwrap();
    assert_eq!(style.headers()["content-type"], "text/css; charset=utf-8");
    assert_eq!(get("/studio/nothing.js").await.unwrap().status(), 404);

    let agents: serde_json::Value = get("/api/agents").await.unwrap().json().await.unwrap();
    let subs: Vec<&String> = agents["supervisor"]["agents"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(subs, [dev::RESEARCH, dev::WRITING]);
    assert_eq!(
        agents["supervisor"]["agents"][dev::RESEARCH]["id"],
        dev::RESEARCH
    );
    assert_eq!(agents["assistant"]["hasMemory"], true);
    let threads = get("/api/memory/threads?resourceId=studio").await.unwrap();
    assert_eq!(
        threads.status(),
        200,
        "the memory routes have the demo's memory"
    );
    serving.abort();
    storage.close().await;
}

#[tokio::test]
async fn a_public_host_needs_a_token() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(["dev", "--host", "0.0.0.0", "--port", "0"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("KESTREL_API_TOKEN") && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[tokio::test]
async fn the_demo_workflows_run_branch_suspend_and_call_their_agent() {
    use futures::StreamExt;
    use kestrel::workflow::{StepStatus, WorkflowStatus};
    let dir = tempfile::tempdir().unwrap();
    let storage = dev::open_storage(&dir.path().join("dev.db")).await.unwrap();
    let notes = ModelSpec::Model(Arc::new(ScriptedModel::from_fn(|_| {
        ScriptedResponse::text_deltas(["- kestrels ", "hover"])
    })));
    let kestrel = dev::demo_kestrel(notes, Arc::new(storage.clone())).unwrap();
    let ids: Vec<&str> = kestrel.workflows().map(|w| w.id()).collect();
    assert_eq!(
        ids,
        [dev::PUBLISH_POST, dev::RESEARCH_BRIEF, dev::WEATHER_REPORT]
    );

    // Parallel readings, then the one branch arm that holds.
    let report = kestrel.workflow(dev::WEATHER_REPORT).unwrap();
    let done = report
        .create_run()
        .start(json!({"city": "Lisbon"}))
        .await
        .unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    let celsius = done.steps["temperature"].output.as_ref().unwrap()["celsius"]
        .as_i64()
        .unwrap();
    let (held, skipped) = if celsius >= 18 {
        ("warm", "cool")
    } else {
        ("cool", "warm")
    };
    assert_eq!(done.steps[held].status, StepStatus::Success);
    assert!(!done.steps.contains_key(skipped), "{done:?}");
    let text = done.result.unwrap()["report"].as_str().unwrap().to_owned();
    assert!(text.starts_with("Lisbon: "), "{text}");
    let bad = report.create_run().start(json!({"town": "Lisbon"})).await;
    assert!(bad.is_err(), "the input schema names the city");

    // A person's review: the run suspends with the draft, and the review resumes it.
    let post = kestrel.workflow(dev::PUBLISH_POST).unwrap();
    let run = post.create_run();
    let waiting = run.start(json!({"topic": "kestrels"})).await.unwrap();
    assert_eq!(waiting.status, WorkflowStatus::Suspended);
    assert_eq!(waiting.suspend_payload["review"]["topic"], "kestrels");
    assert!(post.step("review").unwrap().resume_schema().is_some());
    let published = run
        .resume(Some("review"), json!({"approved": true, "note": "fine"}))
        .await
        .unwrap();
    assert_eq!(published.result.unwrap()["published"], true);

    // The agent step: its events reach the workflow's stream.
    let brief = kestrel.workflow(dev::RESEARCH_BRIEF).unwrap();
    let stream = brief
        .create_run()
        .stream(json!({"topic": "kestrels"}))
        .await
        .unwrap();
    let events: Vec<_> = stream.collect().await;
    let deltas = events
        .iter()
        .filter(|e| e.to_json().contains(r#""type":"text-delta""#))
        .count();
    assert!(deltas >= 2, "the agent's text reached the stream");
    let finish = events.last().unwrap().to_json();
    assert!(
        finish.contains("Brief on kestrels:\\n- kestrels hover"),
        "{finish}"
    );
    storage.close().await;
}
