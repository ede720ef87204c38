//! Run control through one handle per run (`agent.run(id)`): each decision, pausing and
//! proceeding, aborting, and the checks a decision passes (fingerprint, resource).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::agent::{Agent, RunControlError, Waiting};
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{FinishReason, ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_core::store::RunPhase;
use kestrel_core::tool::create_tool;
use serde_json::{Value, json};

/// The last tool result the model reads, as text.
fn last_result(req: &ModelRequest) -> Option<String> {
    let last = req.messages.last().filter(|m| m.role == Role::Tool)?;
    last.parts.iter().find_map(|p| match p {
        Part::ToolResult {
            result, is_error, ..
        } => Some(format!(
            "{}{}",
            if *is_error { "error: " } else { "" },
            result
                .as_str()
                .map_or_else(|| result.to_string(), str::to_owned)
        )),
        _ => None,
    })
}

/// An agent whose model calls `tool` once and answers with its result.
fn agent_with(tool: kestrel_core::tool::FnTool, name: &'static str) -> Agent {
    let model = ScriptedModel::from_fn(move |req| match last_result(req) {
        Some(result) => ScriptedResponse::text(format!("done: {result}")),
        None => ScriptedResponse::tool_call("call-1", name, json!({"to": "bob"})),
    });
    Agent::builder("agent")
        .model(Arc::new(model))
        .tool(tool)
        .build()
        .unwrap()
}

fn mailer(sent: Arc<AtomicUsize>) -> Agent {
    let send = create_tool("send_email")
        .require_approval(true)
        .input_schema(json!({"type": "object"}))
        .execute(move |_: Value, _ctx| {
            let sent = sent.clone();
            async move {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok("sent")
            }
        });
    agent_with(send, "send_email")
}

#[tokio::test]
async fn approve_and_decline_go_through_the_runs_handle() {
    let sent = Arc::new(AtomicUsize::new(0));
    let agent = mailer(sent.clone());
    let stopped = agent.generate("email bob").await.unwrap();
    assert_eq!(stopped.waiting[0].waiting, Waiting::Approval);
    let run = agent.run(&stopped.run_id);
    assert_eq!(run.id(), stopped.run_id);

    // A decision pinned to another call than the one waiting is refused, and changes nothing.
    let stale = run
        .approve("call-1")
        .fingerprint("not-it")
        .await
        .unwrap_err();
    assert!(
        matches!(stale, RunControlError::FingerprintMismatch { .. }),
        "{stale:?}"
    );
    // Acting for a resource, a run that is not that resource's is not found.
    let theirs = run.clone().resource("mallory").approve("call-1").await;
    assert!(
        matches!(theirs, Err(RunControlError::RunNotFound { .. })),
        "{theirs:?}"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 0);

    let fingerprint = stopped.waiting[0].fingerprint.clone();
    let done = run
        .approve("call-1")
        .fingerprint(fingerprint)
        .await
        .unwrap();
    assert_eq!(done.text, "done: sent");
    assert_eq!(sent.load(Ordering::SeqCst), 1);

    let again = agent.generate("email bob again").await.unwrap();
    let declined = agent
        .run(&again.run_id)
        .decline("call-1", Some("not now".into()))
        .await
        .unwrap();
    assert_eq!(declined.text, "done: error: not now");
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn resume_and_submit_go_through_the_runs_handle() {
    let ask = create_tool("ask")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": "which?"}))),
                Some(data) => Ok(format!("chose {}", data["pick"])),
            }
        });
    let agent = agent_with(ask, "ask");
    let stopped = agent.generate("ask me").await.unwrap();
    assert!(matches!(stopped.waiting[0].waiting, Waiting::Resume { .. }));
    let (events, done) = agent
        .run(&stopped.run_id)
        .resume("call-1", json!({"pick": 2}))
        .stream()
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(done.unwrap().text, "done: chose 2");
    assert!(!events.is_empty());

    let locate = create_tool("locate")
        .input_schema(json!({"type": "object"}))
        .client::<Value>();
    let agent = agent_with(locate, "locate");
    let stopped = agent.generate("where?").await.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::ToolCalls);
    let done = agent
        .run(&stopped.run_id)
        .submit("call-1", json!("Lisbon"), false)
        .await
        .unwrap();
    assert_eq!(done.text, "done: Lisbon");
}

#[tokio::test]
async fn a_paused_run_proceeds_and_an_aborted_one_cannot() {
    // Four slow tool steps, then an answer.
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let done = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        if done < 4 {
            ScriptedResponse::tool_call(format!("w{done}"), "work", json!({}))
                .with_delay(Duration::from_millis(40))
        } else {
            ScriptedResponse::text(format!("worked {done} steps"))
        }
    }));
    let work = create_tool("work")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async { Ok("ok") });
    let agent = Agent::builder("worker")
        .model(model)
        .tool(work)
        .max_steps(10)
        .build()
        .unwrap();
    let run = agent.run("run-1");
    assert!(!run.pause(), "no such run in progress yet");
    let stream = agent.stream("work").run_id("run-1").into_stream();
    let ((_, stopped), ()) = tokio::join!(stream.collect(), async {
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(run.pause());
    });
    assert_eq!(stopped.unwrap().finish_reason, FinishReason::Paused);
    let stored = agent.run_store().load("run-1").await.unwrap().unwrap();
    assert_eq!(stored.phase, RunPhase::Paused);
    let done = run.proceed().await.unwrap();
    assert_eq!(done.text, "worked 4 steps");
    assert_eq!(done.run_id, "run-1");
    // A finished run does not proceed again.
    let again = run.proceed().await;
    assert!(
        matches!(again, Err(RunControlError::NotResumable { .. })),
        "{again:?}"
    );

    // A stopped run that is aborted is over: no decision reaches it any more.
    let sent = Arc::new(AtomicUsize::new(0));
    let mailer = mailer(sent.clone());
    let stopped = mailer.generate("email bob").await.unwrap();
    let waiting = mailer.run(&stopped.run_id);
    assert_eq!(waiting.abort().await.unwrap(), 1);
    let late = waiting.approve("call-1").await;
    assert!(
        matches!(late, Err(RunControlError::NotSuspended { .. })),
        "{late:?}"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 0);
}
