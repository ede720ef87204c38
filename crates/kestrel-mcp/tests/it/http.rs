//! A Kestrel client and a Kestrel server over Streamable HTTP, in each protocol era.

use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::message::Part;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::ToolContext;
use kestrel_mcp::{McpClient, McpElicitation, McpError, McpServerConfig, Protocol, ServerState};
use serde_json::{Value, json};

use crate::fixture::{NAPS_CANCELLED, serve_http, serve_http_on, server};

async fn client(url: &str, protocol: Protocol) -> McpClient {
    McpClient::builder()
        .server("kestrel", McpServerConfig::http(url).protocol(protocol))
        .build()
        .unwrap()
}

fn names(tools: &[kestrel_core::tool::SharedTool]) -> Vec<&str> {
    tools.iter().map(|t| t.id()).collect()
}

async fn call(client: &McpClient, tool: &str, input: Value) -> Result<Value, String> {
    let tools = client.list_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.id() == tool).unwrap();
    tool.execute(input, ToolContext::standalone(tool.id()))
        .await
        .map_err(|e| e.message().to_owned())
}

async fn every_era(check: impl AsyncFn(McpClient, Protocol)) {
    let (url, stop) = serve_http(server()).await;
    for protocol in [
        Protocol::Auto,
        Protocol::Stateless,
        Protocol::Legacy,
        Protocol::Pinned("2025-06-18".into()),
    ] {
        check(client(&url, protocol.clone()).await, protocol).await;
    }
    stop.cancel();
}

#[tokio::test]
async fn the_servers_tools_agents_and_workflows_are_listed_under_the_servers_name() {
    every_era(async |client, protocol| {
        let tools = client.list_tools().await.unwrap();
        assert_eq!(
            names(&tools),
            [
                "kestrel_add",
                "kestrel_fail",
                "kestrel_nap",
                "kestrel_delete",
                "kestrel_book",
                "kestrel_ask_helper",
                "kestrel_ask_clerk",
                "kestrel_run_greet"
            ],
            "{protocol:?}"
        );
        let add = &tools[0];
        assert_eq!(add.description(), "Adds two integers");
        assert_eq!(add.input_schema()["required"], json!(["a", "b"]));
        let ask = &tools[5];
        assert_eq!(ask.input_schema()["required"], json!(["message"]));
        let status = &client.status()[0];
        assert_eq!(status.state, ServerState::Connected);
        let expected = match &protocol {
            Protocol::Auto | Protocol::Stateless => "2026-07-28",
            Protocol::Legacy => "2025-11-25",
            Protocol::Pinned(version) => version.as_str(),
            _ => unreachable!(),
        };
        assert_eq!(
            status.protocol_version.as_deref(),
            Some(expected),
            "{protocol:?}"
        );
        assert_eq!(
            status.server_info.as_deref(),
            Some(concat!("Kestrel fixture ", env!("CARGO_PKG_VERSION")))
        );
    })
    .await;
}

#[tokio::test]
async fn calls_give_outputs_failures_and_refusals_in_every_era() {
    every_era(async |client, protocol| {
        assert_eq!(
            call(&client, "kestrel_add", json!({"a": 2, "b": 3})).await,
            Ok(json!({"sum": 5})),
            "{protocol:?}"
        );
        assert_eq!(
            call(&client, "kestrel_fail", json!({"a": 1, "b": 1})).await,
            Err("it failed, as asked".to_owned())
        );
        // The server checks the input against the schema before anything runs.
        let refused = call(&client, "kestrel_add", json!({"a": "two"}))
            .await
            .unwrap_err();
        assert!(refused.contains("add"), "{refused}");
        assert_eq!(
            call(&client, "kestrel_ask_helper", json!({"message": "hi"})).await,
            Ok(json!("you said: hi"))
        );
        assert_eq!(
            call(&client, "kestrel_run_greet", json!({"name": "Ada"})).await,
            Ok(json!({"greeting": "hello, Ada"}))
        );
    })
    .await;
}

/// Calls `tool` until it ends, answering each question the server asks with `answer(question)`;
/// the questions asked, and how the call ended.
async fn call_answering(
    client: &McpClient,
    tool: &str,
    input: Value,
    answer: impl Fn(&McpElicitation) -> Value,
) -> (Vec<McpElicitation>, Result<Value, String>) {
    let tools = client.list_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.id() == tool).unwrap();
    let mut asked = Vec::new();
    let mut ctx = ToolContext::standalone(tool.id());
    loop {
        match tool.execute(input.clone(), ctx.clone()).await {
            Ok(output) => return (asked, Ok(output)),
            Err(error) => match error.into_suspension() {
                Ok(payload) => {
                    let question: McpElicitation = serde_json::from_value(payload.clone()).unwrap();
                    let reply = answer(&question);
                    asked.push(question);
                    assert!(asked.len() < 5, "asked forever: {asked:?}");
                    ctx = ToolContext::standalone(tool.id())
                        .with_resume_data(reply)
                        .with_suspend_payload(payload);
                }
                Err(error) => return (asked, Err(error.message().to_owned())),
            },
        }
    }
}

#[tokio::test]
async fn a_served_call_that_needs_a_person_asks_the_clients_user_in_every_era() {
    every_era(async |client, protocol| {
        // A tool that needs approval is never run unasked: the user is asked first.
        let (asked, done) = call_answering(
            &client,
            "kestrel_delete",
            json!({"a": 1, "b": 1}),
            |_| json!({"action": "accept", "content": {"approve": true}}),
        )
        .await;
        assert_eq!(done, Ok(json!("deleted")), "{protocol:?}");
        assert_eq!(asked.len(), 1);
        assert!(
            asked[0].message.contains("\"delete\" needs your approval"),
            "{}",
            asked[0].message
        );
        assert_eq!(
            asked[0].requested_schema.as_ref().unwrap()["required"],
            json!(["approve"])
        );
        // Refused, or declined: it does not run.
        let (_, refused) = call_answering(
            &client,
            "kestrel_delete",
            json!({"a": 1, "b": 1}),
            |_| json!({"action": "accept", "content": {"approve": false, "reason": "not today"}}),
        )
        .await;
        let refused = refused.unwrap_err();
        assert!(
            refused.contains("did not approve") && refused.contains("not today"),
            "{refused}"
        );
        let (_, declined) = call_answering(
            &client,
            "kestrel_delete",
            json!({"a": 1, "b": 1}),
            |_| json!({"action": "decline"}),
        )
        .await;
        assert!(
            declined.unwrap_err().contains("did not approve"),
            "{protocol:?}"
        );

        // A tool that suspends asks its question, in its resume schema's form.
        let (asked, done) = call_answering(
            &client,
            "kestrel_book",
            json!({"hotel": "Tivoli"}),
            |_| json!({"action": "accept", "content": {"nights": 3}}),
        )
        .await;
        assert_eq!(
            done,
            Ok(json!("Tivoli booked for 3 nights")),
            "{protocol:?}"
        );
        assert_eq!(asked[0].message, "How many nights?");
        assert_eq!(
            asked[0].requested_schema.as_ref().unwrap()["properties"]["nights"]["type"],
            "integer"
        );

        // An agent's run that stops on an approval asks too, and goes on with the answer.
        let (asked, done) = call_answering(
            &client,
            "kestrel_ask_clerk",
            json!({"message": "clean up"}),
            |_| json!({"action": "accept", "content": {"approve": true}}),
        )
        .await;
        assert_eq!(done, Ok(json!("clerk: \"deleted\"")), "{protocol:?}");
        assert!(
            asked[0]
                .message
                .contains("Agent \"clerk\" needs your approval to call tool \"delete\""),
            "{}",
            asked[0].message
        );
        let (_, done) = call_answering(
            &client,
            "kestrel_ask_clerk",
            json!({"message": "clean up"}),
            |_| json!({"action": "decline"}),
        )
        .await;
        // The run goes on with the refusal, which its model reads.
        let done = done.unwrap();
        assert!(done.as_str().unwrap().starts_with("clerk: "), "{done}");
        assert!(!done.as_str().unwrap().contains("\"deleted\""), "{done}");
    })
    .await;
}

#[tokio::test]
async fn an_agent_uses_an_mcp_servers_tool() {
    let (url, stop) = serve_http(server()).await;
    let mcp = client(&url, Protocol::Auto).await;
    let model = std::sync::Arc::new(ScriptedModel::from_fn(|req| {
        let result = req
            .messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .find_map(|p| match p {
                Part::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            });
        match result {
            Some(result) => ScriptedResponse::text(format!("the sum is {}", result["sum"])),
            None => ScriptedResponse::tool_call("c1", "kestrel_add", json!({"a": 20, "b": 22})),
        }
    }));
    let agent = Agent::builder("adder")
        .model(model)
        .tools(mcp.list_tools().await.unwrap())
        .build()
        .unwrap();
    // In a traced instance, the call is an `mcp_tool_call` span.
    let kestrel = kestrel_core::kestrel::Kestrel::builder()
        .tracing(kestrel_core::trace::TracingConfig::new())
        .agent(agent)
        .build()
        .unwrap();
    let agent = kestrel.agent("adder").unwrap();
    let result = agent.generate("add 20 and 22").await.unwrap();
    assert_eq!(result.text, "the sum is 42");
    kestrel.tracer().unwrap().flush().await;
    let spans = kestrel
        .span_store()
        .unwrap()
        .trace(result.trace_id.as_deref().unwrap())
        .await
        .unwrap();
    let call = spans
        .iter()
        .find(|s| s.name == "tool: 'kestrel_add'")
        .expect("the tool call's span");
    assert_eq!(call.span_type, kestrel_core::trace::SpanType::McpToolCall);
    assert_eq!(call.output.as_ref().unwrap()["sum"], 42);
    stop.cancel();
}

#[tokio::test]
async fn an_unreachable_server_is_named_never_an_empty_list() {
    let (url, stop) = serve_http(server()).await;
    let mcp = McpClient::builder()
        .server("up", McpServerConfig::http(&url))
        .server(
            "down",
            McpServerConfig::http("http://127.0.0.1:9/mcp").connect_timeout(Duration::from_secs(5)),
        )
        .build()
        .unwrap();
    let listed = mcp.list_tools_with_errors().await;
    assert_eq!(listed.tools.len(), 8);
    let errors = &listed.errors["down"];
    assert!(
        matches!(&errors[0], McpError::Connect { server, .. } if server == "down"),
        "{errors:?}"
    );
    let error = mcp.list_tools().await.unwrap_err();
    assert!(error.to_string().contains("\"down\""), "{error}");
    let down = mcp.status().into_iter().find(|s| s.name == "down").unwrap();
    assert_eq!(down.state, ServerState::Failed);
    assert!(down.last_error.is_some());
    stop.cancel();
}

#[tokio::test]
async fn an_aborted_call_is_cancelled_on_the_server() {
    let (url, stop) = serve_http(server()).await;
    let mcp = client(&url, Protocol::Auto).await;
    let tools = mcp.list_tools().await.unwrap();
    let nap = tools.iter().find(|t| t.id() == "kestrel_nap").unwrap();
    let abort = kestrel_core::abort::AbortSignal::new();
    let ctx = ToolContext::standalone(nap.id()).with_abort_signal(abort.clone());
    let call = tokio::spawn({
        let nap = nap.clone();
        async move { nap.execute(json!({"ms": 30_000}), ctx).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    abort.abort();
    let error = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the aborted call returns at once")
        .unwrap()
        .unwrap_err();
    assert!(error.message().contains("aborted"), "{}", error.message());
    // The client's cancel reached the server, which aborted the tool.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while NAPS_CANCELLED.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never saw the cancel"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The connection still serves.
    assert_eq!(
        call_tool(nap.as_ref(), "kestrel_nap", json!({"ms": 1})).await,
        Ok(json!("rested"))
    );
    stop.cancel();
}

async fn call_tool(
    tool: &dyn kestrel_core::tool::Tool,
    name: &str,
    input: Value,
) -> Result<Value, String> {
    tool.execute(input, ToolContext::standalone(name))
        .await
        .map_err(|e| e.message().to_owned())
}

#[tokio::test]
async fn a_call_that_outlasts_the_timeout_fails_saying_so() {
    let (url, stop) = serve_http(server()).await;
    let mcp = McpClient::builder()
        .server(
            "kestrel",
            McpServerConfig::http(&url).timeout(Duration::from_millis(300)),
        )
        .build()
        .unwrap();
    let error = call(&mcp, "kestrel_nap", json!({"ms": 10_000}))
        .await
        .unwrap_err();
    assert!(
        error.contains("did not answer tools/call within 300ms"),
        "{error}"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_restarted_server_is_reached_again_on_the_next_call() {
    for protocol in [Protocol::Legacy, Protocol::Stateless] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (url, stop) = serve_http_on(server(), listener).await;
        let mcp = client(&url, protocol.clone()).await;
        let tools = mcp.list_tools().await.unwrap();
        let add = tools
            .iter()
            .find(|t| t.id() == "kestrel_add")
            .unwrap()
            .clone();
        assert_eq!(
            call_tool(add.as_ref(), "kestrel_add", json!({"a": 1, "b": 1})).await,
            Ok(json!({"sum": 2}))
        );
        // The server goes away: a call says so, and does not hang.
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let error = tokio::time::timeout(
            Duration::from_secs(10),
            call_tool(add.as_ref(), "kestrel_add", json!({"a": 1, "b": 1})),
        )
        .await
        .expect("a call to a server that went away returns")
        .unwrap_err();
        assert!(error.contains("\"kestrel\""), "{protocol:?}: {error}");
        // It comes back on the same address: the same tool works again, over a new session.
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let (_, stop) = serve_http_on(server(), listener).await;
        assert_eq!(
            call_tool(add.as_ref(), "kestrel_add", json!({"a": 2, "b": 2})).await,
            Ok(json!({"sum": 4})),
            "{protocol:?}"
        );
        assert_eq!(mcp.status()[0].state, ServerState::Connected);
        stop.cancel();
    }
}

#[tokio::test]
async fn a_disconnected_client_refuses_calls() {
    let (url, stop) = serve_http(server()).await;
    let mcp = client(&url, Protocol::Auto).await;
    let tools = mcp.list_tools().await.unwrap();
    mcp.disconnect().await;
    let error = call_tool(tools[0].as_ref(), "kestrel_add", json!({"a": 1, "b": 1}))
        .await
        .unwrap_err();
    assert!(error.contains("disconnected"), "{error}");
    assert_eq!(mcp.status()[0].state, ServerState::Closed);
    stop.cancel();
}

#[tokio::test]
async fn per_user_headers_come_from_each_calls_request_context() {
    use std::sync::{Arc, Mutex};
    // The server records the Authorization header of every request.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = Arc::clone(&seen);
    let service = server().http_service(
        rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default(),
    );
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let recorded = Arc::clone(&recorded);
                    async move {
                        let token = request
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("none")
                            .to_owned();
                        recorded.lock().unwrap().push(token);
                        next.run(request).await
                    }
                },
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    for protocol in [Protocol::Stateless, Protocol::Legacy] {
        seen.lock().unwrap().clear();
        let config = McpServerConfig::http(format!("http://{address}/mcp"))
            .protocol(protocol.clone())
            .headers_from(|request| match request.get_str("user") {
                Some(user) if user == "mallory" => Err("mallory has no token".to_owned()),
                Some(user) => Ok(vec![(
                    "authorization".to_owned(),
                    format!("Bearer {user}-token"),
                )]),
                None => Ok(vec![(
                    "authorization".to_owned(),
                    "Bearer service".to_owned(),
                )]),
            });
        let mcp = McpClient::builder()
            .server("kestrel", config)
            .build()
            .unwrap();
        let tools = mcp.list_tools().await.unwrap();
        let add = tools.iter().find(|t| t.id() == "kestrel_add").unwrap();
        let as_user = |user: &str| {
            let request = kestrel_core::context::RequestContext::new();
            request.set("user", user);
            ToolContext::standalone("kestrel_add").with_request_context(request)
        };
        for user in ["alice", "bob", "alice"] {
            let sum = add.execute(json!({"a": 1, "b": 2}), as_user(user)).await;
            assert_eq!(sum.unwrap(), json!({"sum": 3}), "{protocol:?}");
        }
        let refused = add
            .execute(json!({"a": 1, "b": 2}), as_user("mallory"))
            .await
            .unwrap_err();
        assert!(
            refused.message().contains("mallory has no token"),
            "{}",
            refused.message()
        );
        let seen = seen.lock().unwrap().clone();
        for token in ["Bearer service", "Bearer alice-token", "Bearer bob-token"] {
            assert!(
                seen.iter().any(|s| s == token),
                "{protocol:?}: {token} not in {seen:?}"
            );
        }
        assert!(!seen.iter().any(|s| s == "none"), "{protocol:?}: {seen:?}");
        mcp.disconnect().await;
    }
}
