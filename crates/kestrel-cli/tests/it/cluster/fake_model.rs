//! The fake OpenAI-compatible model the instances talk to, on 127.0.0.1.

use super::*;

/// Answers by what it is asked: a network's routing call sends the task to the
/// `weather-report` workflow once (for the city after "for " in the task, Oslo by default),
/// then says `none`, and its completion check finds the task done; a tool result gets
/// "Done.", a request to email gets a `send_email` call, a weather question a `get_weather`
/// call, one to delegate gets an `agent-research` call (asking for "slow research"), "slow"
/// gets its words one every 100 ms the first time (later at once), anything else a short
/// greeting; a request whose user says "patiently" waits 1.5 s first.
#[derive(Clone, Default)]
pub(crate) struct FakeModel {
    pub(crate) requests: Arc<Mutex<Vec<Value>>>,
}

pub(crate) struct FakeServer {
    pub(crate) base_url: String,
    pub(crate) model: FakeModel,
}

impl FakeServer {
    pub(crate) async fn start() -> Self {
        let model = FakeModel::default();
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(model.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base_url: format!("http://{addr}/v1"),
            model,
        }
    }

    pub(crate) fn requests(&self) -> usize {
        self.model.requests.lock().unwrap().len()
    }
}

pub(crate) fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

pub(crate) fn finish(reason: &str) -> Vec<String> {
    vec![
        data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})),
        data(
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
}

pub(crate) fn text(words: &[&str]) -> Vec<String> {
    let mut chunks = vec![data(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    )];
    chunks.extend(
        words
            .iter()
            .map(|w| data(json!({"choices": [{"index": 0, "delta": {"content": w}}]}))),
    );
    chunks.extend(finish("stop"));
    chunks
}

/// A streamed answer that calls tool `name` with `arguments` (call id `id`).
pub(crate) fn tool_call(id: &str, name: &str, arguments: Value) -> Vec<String> {
    let mut chunks = vec![data(json!({"choices": [{"index": 0, "delta": {
        "role": "assistant",
        "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]
    }}]}))];
    chunks.extend(finish("tool_calls"));
    chunks
}

pub(crate) async fn chat_completions(State(model): State<FakeModel>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let body_format = body["response_format"]["json_schema"]["name"].clone();
    let seen_before = {
        let mut requests = model.requests.lock().unwrap();
        let seen = requests
            .iter()
            .any(|r| r["messages"].as_array().and_then(|m| m.last()) == Some(&last));
        requests.push(body);
        seen
    };
    if last_user.contains("patiently") {
        // The chaos run's turns take a while, so that instances die in the middle of them.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let sse = [(header::CONTENT_TYPE, "text/event-stream")];
    if let Some(answer) = network_answer(&body_format, &messages, &last_user) {
        return (sse, text(&[&answer.to_string()]).concat()).into_response();
    }
    if last["role"] == "tool" {
        return (sse, text(&["Done."]).concat()).into_response();
    }
    if last_user.contains("email") {
        return (
            sse,
            tool_call(
                "call-email",
                "send_email",
                json!({"to": "bob@example.com", "subject": "Hello", "body": "Hi Bob"}),
            )
            .concat(),
        )
            .into_response();
    }
    if last_user.contains("weather") {
        return (
            sse,
            tool_call("call-weather", "get_weather", json!({"city": "Oslo"})).concat(),
        )
            .into_response();
    }
    if last_user.contains("delegate") {
        return (
            sse,
            tool_call(
                "call-research",
                "agent-research",
                json!({"prompt": "slow research on kestrels"}),
            )
            .concat(),
        )
            .into_response();
    }
    if last_user.contains("slow") && !seen_before {
        let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let chunks = text(&refs);
        let body = futures::stream::iter(chunks).then(|chunk| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, std::convert::Infallible>(chunk)
        });
        return (sse, Body::from_stream(body)).into_response();
    }
    if last_user.contains("slow") {
        return (sse, text(&["finally ", "done"]).concat()).into_response();
    }
    (sse, text(&["Hello", " there"]).concat()).into_response()
}

/// What a network's routing agent answers: for its routing call (structured output named
/// `routing`) the `weather-report` workflow once, then `none`; for its completion check
/// (`completion`) that the task is done. `None` for any other request.
fn network_answer(format: &Value, messages: &[Value], last_user: &str) -> Option<Value> {
    match format.as_str()? {
        "routing" => {
            let routed_before = messages
                .iter()
                .any(|m| m["role"] != "system" && m["content"].to_string().contains("isNetwork"));
            Some(if routed_before {
                json!({"primitiveId": "none", "primitiveType": "none", "prompt": "",
                    "selectionReason": "the report is there"})
            } else {
                let city = last_user
                    .split("for ")
                    .nth(1)
                    .and_then(|rest| rest.split(['.', '\\', '"']).next())
                    .filter(|city| !city.is_empty())
                    .unwrap_or("Oslo");
                json!({"primitiveId": "weather-report", "primitiveType": "workflow",
                    "prompt": json!({"city": city}).to_string(),
                    "selectionReason": "the workflow writes weather reports"})
            })
        }
        "completion" => Some(json!({"isComplete": true,
            "completionReason": "the report is there", "finalResult": "Here is the report."})),
        _ => None,
    }
}
