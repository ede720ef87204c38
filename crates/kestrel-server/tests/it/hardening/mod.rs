//! The server under hostile input: DNS rebinding and cross-origin writes, subscriptions that
//! are dropped at once, provider secrets in error text, reused run ids, bodies that try to
//! raise limits or forge identity, pinned callers and their own runs, and blank tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The tests, by topic; the server under test and its agents are here.
mod access;
mod errors;
mod limits;
mod runs;
mod unread;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::context::RESOURCE_ID_KEY;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::pubsub::InProcessPubSub;
use kestrel_core::store::Stores;
use kestrel_core::tool::{ApprovalPolicy, create_tool};
use kestrel_server::Server;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// How often `tortoise`'s tool ran.
static COUNTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The secret a provider's error body carries: no client may ever read it.
const SECRET: &str = "sk-SECRET-123";

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// A fake OpenAI-compatible server that refuses every call with 401 and a body naming a key
/// and an organisation.
async fn leaky_provider() -> String {
    let app = axum::Router::new().fallback(|| async {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {
                "message": format!("Incorrect API key provided: {SECRET} for org internal-billing-7"),
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }})),
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

/// Counts the model's steps and answers: a tool call on every step (so only `max_steps`
/// ends the run), text once the prompt says `talk`.
fn looping_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        let talk = req
            .messages
            .iter()
            .any(|m| m.role == Role::User && m.text().contains("talk"));
        if talk {
            ScriptedResponse::text("hello")
        } else {
            ScriptedResponse::tool_call(format!("call-{}", req.messages.len()), "whoami", json!({}))
        }
    }))
}

struct Fixture {
    base: String,
    http: reqwest::Client,
    pubsub: Arc<InProcessPubSub>,
}

async fn kestrel(pubsub: Arc<InProcessPubSub>) -> Kestrel {
    let provider = leaky_provider().await;
    let leaky_model = Arc::new(kestrel_core::providers::openai::OpenAiCompatible::new(
        "openai",
        "gpt-test",
        kestrel_core::providers::HttpConfig::new(provider)
            .with_api_key("sk-client")
            .with_max_retries(0),
    ));
    let leaky = Agent::builder("leaky")
        .model(leaky_model.clone())
        .build()
        .unwrap();
    let leaky_sub = Agent::builder("leaky-sub")
        .description("Fails")
        .model(leaky_model)
        .build()
        .unwrap();
    let supervisor = Agent::builder("supervisor")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if req.messages.iter().any(|m| m.role == Role::Tool) {
                ScriptedResponse::text("the helper failed")
            } else {
                ScriptedResponse::tool_call("d1", "agent-leaky-sub", json!({"prompt": "go"}))
            }
        })))
        .agents([leaky_sub])
        .build()
        .unwrap();
    // Reports the resource its request context names, so a test sees what a run acted as.
    let whoami = create_tool("whoami")
        .description("Says who the run acts for")
        .execute(|_: Nothing, ctx| async move {
            Ok(json!({
                "resource": ctx.request_context().get_str(RESOURCE_ID_KEY),
                "claimed": ctx.request_context().get_str("kestrel.delegationDepth"),
            }))
        });
    let looper = Agent::builder("looper")
        .model(looping_model())
        .tool(whoami.clone())
        .max_steps(2)
        .build()
        .unwrap();
    // The looper with a memory: a queued message needs a thread to wait in, and a queue,
    // the instance's, in the memory's storage.
    let storage = Arc::new(kestrel_storage::InMemoryStorage::new());
    let remembering = Agent::builder("remembering")
        .model(looping_model())
        .tool(whoami)
        .max_steps(2)
        .memory(kestrel_memory::Memory::new(storage.clone()))
        .build()
        .unwrap();
    let slow = Agent::builder("slow")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text_deltas(["a", "b", "c"]).with_delay(Duration::from_secs(30))
        })))
        .build()
        .unwrap();
    let careful = Agent::builder("careful")
        .model(looping_model())
        .tool(
            create_tool("harmless")
                .description("Needs nobody, says the tool")
                .execute(|_: Nothing, _ctx| async { Ok("done") }),
        )
        .default_options(RunOptions::new().require_tool_approval(ApprovalPolicy::Always))
        .build()
        .unwrap();
    // Slow to think, then counts once: a run that outlives the request that started it.
    let tortoise = Agent::builder("tortoise")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if req.messages.iter().any(|m| m.role == Role::Tool) {
                ScriptedResponse::text("counted")
            } else {
                ScriptedResponse::tool_call("c1", "count", json!({}))
                    .with_delay(Duration::from_millis(400))
            }
        })))
        .tool(
            create_tool("count")
                .description("Counts")
                .execute(|_: Nothing, _ctx| async {
                    COUNTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok("one more")
                }),
        )
        .build()
        .unwrap();
    // Runs are kept in this process's memory; queued messages in the memory's storage.
    Kestrel::builder()
        .storage(Stores::in_memory().with_queue(storage))
        .agent(tortoise)
        .agent(leaky)
        .agent(supervisor)
        .agent(looper)
        .agent(remembering)
        .agent(slow)
        .agent(careful)
        .pubsub(pubsub)
        .build()
        .unwrap()
}

async fn start(configure: impl FnOnce(Server) -> Server) -> Fixture {
    let pubsub = Arc::new(InProcessPubSub::new());
    let server = configure(Server::new(kestrel(pubsub.clone()).await));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
        pubsub,
    }
}

impl Fixture {
    fn post(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.base)).json(&body)
    }

    async fn status_and_body(request: reqwest::RequestBuilder) -> (StatusCode, String) {
        let response = request.send().await.unwrap();
        let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
        (status, response.text().await.unwrap())
    }
}

fn code_of(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
