//! The agents the server under test serves, and the scripted models behind them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ModelError, ModelEvent, ScriptStep, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_memory::Memory;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct Email {
    to: String,
}

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

#[derive(Deserialize, JsonSchema)]
struct Question {
    topic: String,
}

#[derive(Deserialize, JsonSchema)]
struct Answer {
    answer: String,
}

fn answered(req: &kestrel_core::model::ModelRequest) -> bool {
    req.messages.last().is_some_and(|m| m.role == Role::Tool)
}

/// Text streamed slowly: `n` deltas `"w<i> "`, `pause` apart.
fn slow_text(n: usize, pause: Duration) -> ScriptedResponse {
    let mut steps = Vec::new();
    for i in 0..n {
        steps.push(ScriptStep::Delay(pause));
        steps.push(ScriptStep::Event(ModelEvent::TextDelta {
            text: format!("w{i} "),
        }));
    }
    ScriptedResponse::steps(steps)
}

pub(super) fn kestrel(memory: &Memory) -> Kestrel {
    let shared = memory.clone().shared();
    let echo = Agent::builder("echo")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text_deltas(["hello ", last.as_str()])
        })))
        .memory(shared.clone())
        .build()
        .unwrap();
    let weather = Agent::builder("weather")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Sunny.")
            } else {
                ScriptedResponse::default().and_text("Hello").and_tool_call(
                    "c1",
                    "weather",
                    json!({"city": "Paris"}).to_string(),
                )
            }
        })))
        .tool(
            create_tool("weather")
                .description("The weather of a city")
                .execute(
                    |city: City, _ctx| async move { Ok(json!({"temp": 20, "city": city.city})) },
                ),
        )
        .build()
        .unwrap();
    let send_email = create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .execute(|email: Email, _ctx| async move { Ok(format!("sent to {}", email.to)) });
    let mailer = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Done.")
            } else {
                ScriptedResponse::default()
                    .and_text("Sending.")
                    .and_tool_call(
                        "call-1",
                        "send_email",
                        json!({"to": "bob@example.com"}).to_string(),
                    )
            }
        })))
        .tool(send_email.clone())
        .memory(shared.clone())
        .build()
        .unwrap();
    // Two calls that need approval in one step.
    let pair = Agent::builder("pair")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Both handled.")
            } else {
                ScriptedResponse::default()
                    .and_tool_call(
                        "c-a",
                        "send_email",
                        json!({"to": "a@example.com"}).to_string(),
                    )
                    .and_tool_call(
                        "c-b",
                        "send_email",
                        json!({"to": "b@example.com"}).to_string(),
                    )
            }
        })))
        .tool(send_email.clone())
        .memory(shared.clone())
        .build()
        .unwrap();
    // A supervisor whose sub-agent's tool needs approval.
    let helper = Agent::builder("helper")
        .description("Sends mail")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Mailed.")
            } else {
                ScriptedResponse::tool_call("h1", "send_email", json!({"to": "bob@example.com"}))
            }
        })))
        .tool(send_email.clone())
        .build()
        .unwrap();
    let supervisor = Agent::builder("supervisor")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("All done.")
            } else {
                ScriptedResponse::tool_call("d1", "agent-helper", json!({"prompt": "mail bob"}))
            }
        })))
        .agents([helper])
        .memory(shared.clone())
        .build()
        .unwrap();
    // Reasoning, then a call that needs approval, whose input does not stream (fixture B).
    let thinker = Agent::builder("thinker")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Deleted.")
            } else {
                ScriptedResponse::steps(vec![
                    ScriptStep::Event(ModelEvent::ReasoningDelta {
                        text: "think".into(),
                    }),
                    ScriptStep::Event(ModelEvent::ToolCall {
                        id: "c2".into(),
                        name: "del".into(),
                        input: json!({"id": "x"}).to_string(),
                    }),
                ])
            }
        })))
        .tool(
            create_tool("del")
                .description("Deletes")
                .require_approval(true)
                .execute(|_: HashMap<String, String>, _ctx| async move { Ok("deleted") }),
        )
        .build()
        .unwrap();
    let asker = Agent::builder("asker")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Thanks.")
            } else {
                ScriptedResponse::tool_call("ask-1", "ask", json!({"topic": "colour"}))
            }
        })))
        .tool(
            create_tool("ask")
                .description("Asks the person")
                .resume_type::<Answer>()
                .execute(|q: Question, ctx| async move {
                    match ctx.resume_data_as::<Answer>()? {
                        Some(a) => Ok(json!({"topic": q.topic, "answer": a.answer})),
                        None => {
                            Err(ctx.suspend(json!({"question": format!("Which {}?", q.topic)})))
                        }
                    }
                }),
        )
        .memory(shared.clone())
        .build()
        .unwrap();
    let slow = Agent::builder("slow")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            slow_text(12, Duration::from_millis(60))
        })))
        .memory(shared.clone())
        .build()
        .unwrap();
    let broken = Agent::builder("broken")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::BadRequest {
                provider: "acme".into(),
                status: 400,
                message: "sk-secret-123 is not a valid key".into(),
            })
        })))
        .build()
        .unwrap();
    // Counts the answers in its context; its second call fails, the others answer.
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flaky = Agent::builder("flaky")
        .model(Arc::new(ScriptedModel::from_fn(move |req| {
            let call = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if call == 1 {
                return ScriptedResponse::error(ModelError::BadRequest {
                    provider: "acme".into(),
                    status: 400,
                    message: "down".into(),
                });
            }
            let seen = req
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count();
            ScriptedResponse::text(format!("answer {call}, {seen} answers seen"))
        })))
        .memory(shared.clone())
        .build()
        .unwrap();
    // Answers with a key its guardrail blocks.
    let guarded = Agent::builder("guarded")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text_deltas(["the key is ", "sk-proj-abcdefghijklmnopqrstuvwxyz"])
        })))
        .output_processor(
            kestrel_processors::RegexFilter::new()
                .preset(kestrel_processors::Preset::Secrets)
                .strategy(kestrel_processors::FilterStrategy::Block),
        )
        .memory(shared.clone())
        .build()
        .unwrap();
    Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .agent(guarded)
        .agent(flaky)
        .agent(echo)
        .agent(weather)
        .agent(mailer)
        .agent(pair)
        .agent(supervisor)
        .agent(thinker)
        .agent(asker)
        .agent(slow)
        .agent(broken)
        .build()
        .unwrap()
}
