//! People in the loop: approval (tool and run policies), decline with a reason, suspend and
//! resume with schemas, client tools, and every refused decision (unknown run, stale call,
//! wrong kind, changed fingerprint, second decision, another resource, racing decisions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kestrel_core::agent::{Agent, DEFAULT_DECLINE_REASON, RunControlError, RunOptions, Waiting};
use kestrel_core::event::{Event, EventKind};
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{FinishReason, ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_core::store::SuspendedRunsQuery;
use kestrel_core::tool::{ApprovalPolicy, FnTool, ToolError, create_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize, JsonSchema)]
struct Email {
    to: String,
}

/// What the model reads as the last tool results, joined ("error: " marks failed ones).
fn tool_results(req: &ModelRequest) -> Option<String> {
    let last = req.messages.last()?;
    if last.role != Role::Tool {
        return None;
    }
    let texts: Vec<String> = last
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolResult {
                result, is_error, ..
            } => {
                let text = result
                    .as_str()
                    .map_or_else(|| result.to_string(), str::to_owned);
                Some(if *is_error {
                    format!("error: {text}")
                } else {
                    text
                })
            }
            _ => None,
        })
        .collect();
    Some(texts.join(" | "))
}

/// A model that calls `tool` with `args` once, then answers with what the tool returned.
fn model(tool: &'static str, args: Value) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |req| match tool_results(req) {
        Some(results) => ScriptedResponse::text(format!("done: {results}")),
        None => ScriptedResponse::tool_call("call-1", tool, args.clone()),
    }))
}

fn send_email(runs: Arc<AtomicUsize>) -> FnTool {
    create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .execute(move |input: Email, _ctx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(format!("sent to {}", input.to))
            }
        })
}

fn mailer(runs: Arc<AtomicUsize>) -> Agent {
    Agent::builder("mailer")
        .model(model("send_email", json!({"to": "bob@example.com"})))
        .tool(send_email(runs))
        .build()
        .unwrap()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

#[tokio::test]
async fn an_approval_gated_call_stops_the_run_and_approval_continues_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = mailer(runs.clone());
    let (events, result) = agent.stream("email bob").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.finish_reason, FinishReason::Suspended);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "nothing runs before approval"
    );
    let names = kinds(&events);
    assert_eq!(names.last(), Some(&"tool-call-approval"), "{names:?}");
    assert!(!names.contains(&"finish"), "{names:?}");
    let EventKind::ToolCallApproval(approval) = &events.last().unwrap().kind else {
        unreachable!()
    };
    assert_eq!(approval.tool_call_id, "call-1");
    assert_eq!(approval.args, json!({"to": "bob@example.com"}));
    let schema: Value = serde_json::from_str(&approval.resume_schema).unwrap();
    assert_eq!(schema["required"], json!(["approved"]));
    assert_eq!(result.waiting.len(), 1);
    assert_eq!(result.waiting[0].waiting, Waiting::Approval);
    assert_eq!(result.waiting[0].fingerprint, approval.fingerprint);
    // The wire form carries the fingerprint.
    let wire = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(wire["type"], "tool-call-approval");
    assert_eq!(wire["payload"]["fingerprint"], json!(approval.fingerprint));

    let listed = agent
        .list_suspended_runs(SuspendedRunsQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.runs[0].run_id, result.run_id);

    let stream = agent
        .run(&result.run_id)
        .approve("call-1")
        .fingerprint(&approval.fingerprint)
        .stream()
        .await
        .unwrap();
    assert_eq!(stream.run_id(), result.run_id);
    let (events, done) = stream.collect().await;
    let done = done.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(done.run_id, result.run_id);
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(done.text, "done: sent to bob@example.com");
    assert!(done.waiting.is_empty());
    let names = kinds(&events);
    assert_eq!(names.first(), Some(&"tool-result"), "{names:?}");
    assert!(!names.contains(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"finish"), "{names:?}");

    // A second decision on the same call is refused and changes nothing.
    let again = agent
        .run(&result.run_id)
        .approve("call-1")
        .fingerprint(&approval.fingerprint)
        .stream()
        .await
        .unwrap_err();
    assert!(
        matches!(
            again,
            RunControlError::NotSuspended {
                phase: "finished",
                ..
            }
        ),
        "{again:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let listed = agent
        .list_suspended_runs(SuspendedRunsQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 0);
}

#[tokio::test]
async fn declining_never_runs_the_tool_and_the_model_reads_the_reason() {
    for reason in [None, Some("Bob is on holiday".to_owned())] {
        let runs = Arc::new(AtomicUsize::new(0));
        let agent = mailer(runs.clone());
        let stopped = agent.generate("email bob").await.unwrap();
        assert_eq!(stopped.finish_reason, FinishReason::Suspended);
        let done = agent
            .run(&stopped.run_id)
            .decline("call-1", reason.clone())
            .await
            .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        let expected = reason.as_deref().unwrap_or(DEFAULT_DECLINE_REASON);
        assert_eq!(done.text, format!("done: error: {expected}"));
        assert!(done.tool_results[0].is_error);
        assert!(
            done.tool_results[0].denied,
            "a declined call is marked denied"
        );
        // So is the tool message memory stores.
        let denied: Vec<bool> = done
            .response_messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolResult { denied, .. } => Some(*denied),
                _ => None,
            })
            .collect();
        assert_eq!(denied, [true]);
    }
}

#[tokio::test]
async fn an_approved_call_that_fails_is_not_denied() {
    let agent = Agent::builder("breaker")
        .model(model("explode", json!({"to": "bob"})))
        .tool(
            create_tool("explode")
                .description("Fails")
                .require_approval(true)
                .execute(|_: Email, _ctx| async { Err::<String, _>(ToolError::new("boom")) }),
        )
        .build()
        .unwrap();
    let stopped = agent.generate("go").await.unwrap();
    let done = agent.run(&stopped.run_id).approve("call-1").await.unwrap();
    assert!(done.tool_results[0].is_error);
    assert!(!done.tool_results[0].denied);
    // Not serialized when unset: stored messages of older builds and newer ones read alike.
    let json = serde_json::to_value(&done.tool_results[0]).unwrap();
    assert!(json.get("denied").is_none(), "{json}");
}

#[tokio::test]
async fn the_run_policy_is_ored_with_the_tools() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let lookup = create_tool("lookup")
        .description("Looks a word up")
        .input_schema(json!({"type": "object", "properties": {"word": {"type": "string"}}}))
        .execute(move |_input: Value, _ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok("a bird of prey")
            }
        });
    let agent = Agent::builder("dictionary")
        .model(model("lookup", json!({"word": "kestrel"})))
        .tool(lookup)
        .build()
        .unwrap();
    // No policy: the call runs.
    let free = agent.generate("kestrel?").await.unwrap();
    assert_eq!(free.finish_reason, FinishReason::Stop);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A run policy selecting the call stops it.
    let policy =
        ApprovalPolicy::when(|args, ctx| ctx.tool_name == "lookup" && args["word"] == "kestrel");
    let stopped = agent
        .generate("kestrel?")
        .require_tool_approval(policy)
        .await
        .unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A policy that selects nothing lets it through.
    let none = ApprovalPolicy::when(|args, _| args["word"] == "osprey");
    let through = agent
        .generate("kestrel?")
        .require_tool_approval(none)
        .await
        .unwrap();
    assert_eq!(through.finish_reason, FinishReason::Stop);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A dictionary agent whose model looks up two words ("kestrel", then "osprey"), one step
/// each, then answers with what `lookup` returned.
fn dictionary() -> kestrel_core::agent::AgentBuilder {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let tool_messages = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        match tool_messages {
            0 => ScriptedResponse::tool_call("call-1", "lookup", json!({"word": "kestrel"})),
            1 => ScriptedResponse::tool_call("call-2", "lookup", json!({"word": "osprey"})),
            _ => ScriptedResponse::text(format!("done: {}", tool_results(req).unwrap())),
        }
    }));
    let lookup = create_tool("lookup")
        .description("Looks a word up")
        .input_schema(json!({"type": "object", "properties": {"word": {"type": "string"}}}))
        .execute(|input: Value, _ctx| async move {
            Ok(format!(
                "{} is a bird",
                input["word"].as_str().unwrap_or("?")
            ))
        });
    Agent::builder("dictionary").model(model).tool(lookup)
}

#[tokio::test]
async fn a_run_policy_function_that_cannot_come_back_means_approval_for_every_later_call() {
    let agent = dictionary().build().unwrap();
    let only_kestrel = || ApprovalPolicy::when(|args, _| args["word"] == "kestrel");
    let first = agent
        .generate("two words")
        .require_tool_approval(only_kestrel())
        .await
        .unwrap();
    assert_eq!(first.waiting[0].tool_call_id, "call-1");
    // Continued without the function (as after a restart): call-2 is asked about too, even
    // though the function would have let it through. Nothing is approved by default.
    let second = agent.run(&first.run_id).approve("call-1").await.unwrap();
    assert_eq!(second.finish_reason, FinishReason::Suspended);
    assert_eq!(second.waiting[0].tool_call_id, "call-2");

    // Passing the function again restores it.
    let again = agent
        .generate("two words")
        .require_tool_approval(only_kestrel())
        .await
        .unwrap();
    let done = agent
        .run(&again.run_id)
        .options(RunOptions::new().require_tool_approval(only_kestrel()))
        .approve("call-1")
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(done.text, "done: osprey is a bird");
}

/// Issue 15, bug 1: the agent's default options hold on every continuation, not only at the
/// start. A default approval function stops `kestrel` and, after the approval, lets `osprey`
/// through; a default `until_idle` holds on resume too.
#[tokio::test]
async fn default_options_hold_when_a_run_is_continued() {
    let agent = dictionary()
        .default_options(
            RunOptions::new()
                .require_tool_approval(ApprovalPolicy::when(|args, _| args["word"] == "kestrel")),
        )
        .build()
        .unwrap();
    let first = agent.generate("two words").await.unwrap();
    assert_eq!(first.waiting.len(), 1);
    assert_eq!(first.waiting[0].tool_call_id, "call-1");
    let done = agent.run(&first.run_id).approve("call-1").await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(done.text, "done: osprey is a bird");

    // The stream form of the continuation, too.
    let first = agent.generate("two words").await.unwrap();
    let stream = agent
        .run(&first.run_id)
        .approve("call-1")
        .stream()
        .await
        .unwrap();
    let done = stream.result().await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
}

#[tokio::test]
async fn refused_decisions_name_what_is_wrong_and_change_nothing() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = mailer(runs.clone());
    let stopped = agent
        .generate("email bob")
        .memory("t1", "alice")
        .await
        .unwrap();
    let run_id = stopped.run_id.clone();

    let unknown = agent
        .run("no-such-run")
        .approve("call-1")
        .stream()
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, RunControlError::RunNotFound { .. }),
        "{unknown:?}"
    );

    let stale = agent
        .run(&run_id)
        .approve("call-0")
        .stream()
        .await
        .unwrap_err();
    let RunControlError::CallNotWaiting { waiting, .. } = &stale else {
        panic!("{stale:?}")
    };
    assert_eq!(waiting, &["call-1"]);
    assert!(stale.to_string().contains("call-0"), "{stale}");

    let changed = agent
        .run(&run_id)
        .approve("call-1")
        .fingerprint("0123")
        .stream()
        .await
        .unwrap_err();
    assert!(
        matches!(changed, RunControlError::FingerprintMismatch { .. }),
        "{changed:?}"
    );

    let wrong_kind = agent
        .run(&run_id)
        .resume("call-1", json!({"ok": true}))
        .stream()
        .await
        .unwrap_err();
    assert!(
        matches!(
            wrong_kind,
            RunControlError::WrongDecision {
                waits_for: "an approval",
                given: "resume data",
                ..
            }
        ),
        "{wrong_kind:?}"
    );

    let foreign = agent
        .run(&run_id)
        .resource("mallory")
        .approve("call-1")
        .stream()
        .await
        .unwrap_err();
    assert!(
        matches!(foreign, RunControlError::RunNotFound { .. }),
        "{foreign:?}"
    );

    let other_agent = mailer(runs.clone());
    let other = Agent::builder("other")
        .model(model("send_email", json!({})))
        .run_store(other_agent.run_store().clone())
        .build()
        .unwrap();
    let not_mine = other
        .run(&run_id)
        .approve("call-1")
        .stream()
        .await
        .unwrap_err();
    assert!(matches!(not_mine, RunControlError::RunNotFound { .. }));

    // Nothing changed: the run still waits, and the right decision still works.
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let done = agent
        .run(&run_id)
        .resource("alice")
        .approve("call-1")
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_approvals_of_one_call_have_exactly_one_winner() {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = mailer(runs.clone());
    let stopped = agent.generate("email bob").await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let agent = agent.clone();
            let run = agent.run(&stopped.run_id);
            tokio::spawn(async move {
                if i % 2 == 0 {
                    run.approve("call-1").await
                } else {
                    run.decline("call-1", None).await
                }
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(result) => winners.push(result),
            Err(
                RunControlError::Conflict { .. }
                | RunControlError::NotSuspended { .. }
                | RunControlError::CallNotWaiting { .. },
            ) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    let approved = !winners[0].tool_results[0].is_error;
    assert_eq!(runs.load(Ordering::SeqCst), usize::from(approved));
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Booking {
    hotel: String,
}

/// Only its schema is used (the suspend schema).
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Question {
    question: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Answer {
    nights: u32,
}

#[tokio::test]
async fn a_tool_suspends_and_resumes_with_checked_data() {
    let entered = Arc::new(AtomicUsize::new(0));
    let counter = entered.clone();
    let book = create_tool("book")
        .description("Books a hotel")
        .suspend_type::<Question>()
        .resume_type::<Answer>()
        .execute(move |input: Booking, ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let Some(answer) = ctx.resume_data_as::<Answer>()? else {
                    return Err(ctx.suspend(json!({"question": "How many nights?"})));
                };
                Ok(format!(
                    "{} booked for {} nights",
                    input.hotel, answer.nights
                ))
            }
        });
    let agent = Agent::builder("travel")
        .model(model("book", json!({"hotel": "Tivoli"})))
        .tool(book)
        .build()
        .unwrap();
    let (events, stopped) = agent.stream("book Tivoli").into_stream().collect().await;
    let stopped = stopped.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let EventKind::ToolCallSuspended(suspended) = &events.last().unwrap().kind else {
        panic!("{:?}", kinds(&events))
    };
    assert_eq!(suspended.suspend_payload["question"], "How many nights?");
    let schema: Value = serde_json::from_str(&suspended.resume_schema).unwrap();
    assert_eq!(schema["properties"]["nights"]["type"], "integer");
    assert!(matches!(stopped.waiting[0].waiting, Waiting::Resume { .. }));

    let run = agent.run(&stopped.run_id);
    let invalid = run
        .resume("call-1", json!({"nights": "two"}))
        .stream()
        .await
        .unwrap_err();
    let RunControlError::InvalidResumeData { errors, .. } = &invalid else {
        panic!("{invalid:?}")
    };
    assert!(errors[0].contains("/nights"), "{errors:?}");
    let approval = run.approve("call-1").stream().await.unwrap_err();
    assert!(
        matches!(
            approval,
            RunControlError::WrongDecision {
                waits_for: "resume data",
                ..
            }
        ),
        "{approval:?}"
    );
    assert_eq!(entered.load(Ordering::SeqCst), 1);

    let done = run.resume("call-1", json!({"nights": 2})).await.unwrap();
    assert_eq!(done.text, "done: Tivoli booked for 2 nights");
    assert_eq!(entered.load(Ordering::SeqCst), 2);
    assert_eq!(done.run_id, stopped.run_id);
}

#[tokio::test]
async fn a_payload_outside_the_suspend_schema_fails_the_call_instead() {
    let book = create_tool("book")
        .description("Books a hotel")
        .suspend_type::<Question>()
        .execute(|_input: Booking, ctx| async move {
            Err::<String, _>(ctx.suspend(json!({"wrong": 1})))
        });
    let agent = Agent::builder("travel")
        .model(model("book", json!({"hotel": "Tivoli"})))
        .tool(book)
        .build()
        .unwrap();
    let done = agent.generate("book").await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert!(done.text.contains("suspend schema"), "{}", done.text);
}

#[tokio::test]
async fn approval_then_suspension_needs_both_decisions_in_order() {
    let book = create_tool("book")
        .description("Books a hotel")
        .require_approval(true)
        .execute(|input: Booking, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": "nights?"}))),
                Some(data) => Ok(format!("{} x{}", input.hotel, data["nights"])),
            }
        });
    let agent = Agent::builder("travel")
        .model(model("book", json!({"hotel": "Tivoli"})))
        .tool(book)
        .build()
        .unwrap();
    let first = agent.generate("book").await.unwrap();
    assert_eq!(first.waiting[0].waiting, Waiting::Approval);
    let run = agent.run(&first.run_id);
    let second = run.approve("call-1").await.unwrap();
    assert_eq!(second.finish_reason, FinishReason::Suspended);
    assert!(matches!(second.waiting[0].waiting, Waiting::Resume { .. }));
    // Resuming does not ask for approval again.
    let done = run.resume("call-1", json!({"nights": 3})).await.unwrap();
    assert_eq!(done.text, "done: Tivoli x3");
}

#[tokio::test]
async fn a_client_tool_stops_with_tool_calls_and_continues_with_the_submitted_result() {
    let location = create_tool("get_location")
        .description("The user's location, from the browser")
        .input_schema(json!({"type": "object", "properties": {}}))
        .client::<Value>();
    let agent = Agent::builder("guide")
        .model(model("get_location", json!({})))
        .tool(location)
        .build()
        .unwrap();
    let stopped = agent.generate("where am I?").await.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::ToolCalls);
    assert_eq!(stopped.waiting[0].waiting, Waiting::ClientResult);
    let run = agent.run(&stopped.run_id);
    let approval = run.approve("call-1").stream().await.unwrap_err();
    assert!(matches!(approval, RunControlError::WrongDecision { .. }));
    let done = run.submit("call-1", json!("Lisbon"), false).await.unwrap();
    assert_eq!(done.text, "done: Lisbon");
}

#[tokio::test]
async fn of_two_gated_calls_each_decision_names_one() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(ScriptedModel::from_fn(|req| match tool_results(req) {
        Some(results) => ScriptedResponse::text(format!("done: {results}")),
        None => ScriptedResponse::tool_call("call-a", "send_email", json!({"to": "a@x"}))
            .and_tool_call("call-b", "send_email", json!({"to": "b@x"}).to_string()),
    }));
    let agent = Agent::builder("mailer")
        .model(model)
        .tool(send_email(runs.clone()))
        .build()
        .unwrap();
    let first = agent.generate("email both").await.unwrap();
    assert_eq!(first.waiting.len(), 2);
    let second = agent.run(&first.run_id).approve("call-b").await.unwrap();
    // call-b ran; call-a still waits.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(second.finish_reason, FinishReason::Suspended);
    assert_eq!(second.waiting.len(), 1);
    assert_eq!(second.waiting[0].tool_call_id, "call-a");
    let done = agent
        .run(&first.run_id)
        .decline("call-a", None)
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Results keep the model's order.
    assert_eq!(
        done.text,
        format!("done: error: {DEFAULT_DECLINE_REASON} | sent to b@x")
    );
}
