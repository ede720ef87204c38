//! The `/api/memory` routes over a real socket: threads (create, get, list with pages, update,
//! delete), their messages after a run, working memory, observations, bad queries and bodies,
//! and a caller pinned to a resource.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::{Memory, WorkingMemory, WorkingMemoryScope};
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use serde_json::{Value, json};

struct Fixture {
    base: String,
    http: reqwest::Client,
    token: Option<&'static str>,
}

/// A server whose `echo` agent remembers through `memory` (when given).
async fn start(memory: Option<Memory>, configure: impl FnOnce(Server) -> Server) -> Fixture {
    let mut echo = Agent::builder("echo").model(Arc::new(ScriptedModel::from_fn(|req| {
        let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
        ScriptedResponse::text(format!("echo: {last}"))
    })));
    if let Some(memory) = &memory {
        echo = echo.memory(memory.clone());
    }
    let mut kestrel = Kestrel::builder().agent(echo.build().unwrap());
    if let Some(memory) = &memory {
        kestrel = kestrel
            .storage(Arc::clone(memory.storage().unwrap()))
            .memory(memory.clone());
    }
    let mut server = Server::new(kestrel.build().unwrap());
    if let Some(memory) = memory {
        server = server.memory(memory);
    }
    let server = configure(server);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
        token: None,
    }
}

fn in_memory() -> Memory {
    Memory::new(Arc::new(InMemoryStorage::new()))
}

impl Fixture {
    fn with_token(mut self, token: &'static str) -> Self {
        self.token = Some(token);
        self
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PATCH, path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, None).await
    }
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error body: {body}"))
}

#[tokio::test]
async fn threads_are_created_read_listed_updated_and_deleted() {
    let f = start(Some(in_memory()), |s| s).await;
    let (status, created) = f
        .post(
            "/memory/threads?agentId=echo",
            json!({"resourceId": "alice", "title": "Trip", "metadata": {"topic": "travel"}, "threadId": "t-1"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], "t-1");
    assert_eq!(created["resourceId"], "alice");
    assert_eq!(created["title"], "Trip");
    assert!(created["createdAt"].is_string());

    let (status, again) = f
        .post(
            "/memory/threads",
            json!({"resourceId": "alice", "threadId": "t-1"}),
        )
        .await;
    assert_eq!((status, error_code(&again)), (409, "thread_exists"));

    for n in 2..=3 {
        let (status, _) = f
            .post(
                "/memory/threads",
                json!({"resourceId": "alice", "threadId": format!("t-{n}")}),
            )
            .await;
        assert_eq!(status, 201);
    }
    f.post(
        "/memory/threads",
        json!({"resourceId": "bob", "threadId": "b-1"}),
    )
    .await;

    let (status, page) = f
        .get(
            "/memory/threads?resourceId=alice&perPage=2&page=0&orderBy=createdAt&sortDirection=ASC",
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["total"], 3);
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["perPage"], 2);
    let ids: Vec<&str> = page["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t-1", "t-2"]);
    let (_, last) = f
        .get("/memory/threads?resourceId=alice&perPage=2&page=1&sortDirection=asc")
        .await;
    assert_eq!(last["threads"][0]["id"], "t-3");
    assert_eq!(last["hasMore"], false);
    let (_, travel) = f
        .get("/memory/threads?metadata=%7B%22topic%22%3A%22travel%22%7D")
        .await;
    assert_eq!(travel["total"], 1, "{travel}");

    let (status, updated) = f
        .patch(
            "/memory/threads/t-1",
            json!({"title": "Trip to Lisbon", "metadata": {"days": 3}}),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["title"], "Trip to Lisbon");
    assert_eq!(updated["metadata"], json!({"topic": "travel", "days": 3}));
    let (status, moved) = f
        .patch("/memory/threads/t-1", json!({"resourceId": "bob"}))
        .await;
    assert_eq!((status, error_code(&moved)), (409, "thread_resource"));

    let (status, fetched) = f.get("/memory/threads/t-1?resourceId=alice").await;
    assert_eq!(status, 200);
    assert_eq!(fetched["title"], "Trip to Lisbon");
    let (status, wrong_owner) = f.get("/memory/threads/t-1?resourceId=bob").await;
    assert_eq!((status, error_code(&wrong_owner)), (404, "not_found"));

    let (status, deleted) = f.delete("/memory/threads/t-1").await;
    assert_eq!(status, 200, "{deleted}");
    let (status, _) = f.get("/memory/threads/t-1").await;
    assert_eq!(status, 404);
    let (status, _) = f.delete("/memory/threads/t-1").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_runs_messages_are_listed_oldest_first() {
    let f = start(Some(in_memory()), |s| s).await;
    let (status, result) = f
        .post(
            "/agents/echo/generate",
            json!({"messages": "hello there", "memory": {"thread": "chat-1", "resource": "alice"}}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    let (status, listed) = f.get("/memory/threads/chat-1/messages?agentId=echo").await;
    assert_eq!(status, 200, "{listed}");
    let messages = listed["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{listed}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[0]["threadId"], "chat-1");
    // Mastra's MastraDBMessage: the parts are in `content`, format 2.
    assert_eq!(messages[0]["type"], "v2");
    assert_eq!(messages[0]["content"]["format"], 2);
    assert_eq!(messages[1]["content"]["content"], "echo: hello there");
    assert!(messages[0].get("parts").is_none(), "{listed}");
    let texts: Vec<String> = messages
        .iter()
        .map(|m| {
            m["content"]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect()
        })
        .collect();
    assert_eq!(texts, ["hello there", "echo: hello there"]);
    assert_eq!(listed["total"], 2);
    // The same messages as AI SDK UIMessages, ids kept.
    let ui = listed["uiMessages"].as_array().unwrap();
    assert_eq!(ui.len(), 2, "{listed}");
    assert_eq!(ui[0]["id"], messages[0]["id"]);
    assert_eq!(ui[0]["role"], "user");
    assert_eq!(ui[1]["role"], "assistant");
    let assistant_text: Vec<&str> = ui[1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(assistant_text, ["echo: hello there"]);
    let (status, body) = f.get("/memory/threads/chat-1/messages?version=v7").await;
    assert_eq!((status, error_code(&body)), (400, "invalid_query"));

    let (_, page) = f
        .get("/memory/threads/chat-1/messages?perPage=1&page=1")
        .await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page["messages"][0]["role"], "assistant");
    assert_eq!(page["hasMore"], false);
}

#[tokio::test]
async fn working_memory_is_read_and_replaced() {
    let storage = Arc::new(InMemoryStorage::new());
    let memory = Memory::builder()
        .storage(storage)
        .working_memory(
            WorkingMemory::template("# User\n- Name:").scope(WorkingMemoryScope::Resource),
        )
        .build()
        .unwrap();
    let f = start(Some(memory), |s| s).await;
    f.post(
        "/memory/threads",
        json!({"resourceId": "alice", "threadId": "t-1"}),
    )
    .await;
    f.post(
        "/memory/threads",
        json!({"resourceId": "alice", "threadId": "t-2"}),
    )
    .await;
    let (status, empty) = f.get("/memory/threads/t-1/working-memory").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["enabled"], true);
    assert_eq!(empty["workingMemory"], Value::Null);
    assert_eq!(empty["source"], "resource");
    assert_eq!(empty["workingMemoryTemplate"], "# User\n- Name:");

    let (status, set) = f
        .post(
            "/memory/threads/t-1/working-memory",
            json!({"workingMemory": "# User\n- Name: Alice", "resourceId": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{set}");
    // Resource scope: the resource's other thread sees it too.
    let (_, shared) = f.get("/memory/threads/t-2/working-memory").await;
    assert_eq!(shared["workingMemory"], "# User\n- Name: Alice");

    let (status, missing) = f
        .post("/memory/threads/t-1/working-memory", json!({"memory": "x"}))
        .await;
    assert_eq!((status, error_code(&missing)), (422, "invalid_body"));
    let (status, _) = f
        .post(
            "/memory/threads/nope/working-memory",
            json!({"workingMemory": "x"}),
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn working_memory_with_a_schema_takes_a_json_object_only() {
    let memory = Memory::builder()
        .storage(Arc::new(InMemoryStorage::new()))
        .working_memory(
            WorkingMemory::schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            )
            .scope(WorkingMemoryScope::Thread),
        )
        .build()
        .unwrap();
    let f = start(Some(memory), |s| s).await;
    f.post(
        "/memory/threads",
        json!({"resourceId": "alice", "threadId": "t-1"}),
    )
    .await;
    let (status, refused) = f
        .post(
            "/memory/threads/t-1/working-memory",
            json!({"workingMemory": "Alice"}),
        )
        .await;
    assert_eq!(
        (status, error_code(&refused)),
        (422, "invalid_body"),
        "{refused}"
    );
    let (status, _) = f
        .post(
            "/memory/threads/t-1/working-memory",
            json!({"workingMemory": "{\"name\":\"Alice\"}"}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, read) = f.get("/memory/threads/t-1/working-memory").await;
    assert_eq!(read["source"], "thread");
    assert_eq!(read["workingMemory"], "{\"name\":\"Alice\"}");
}

#[tokio::test]
async fn memory_without_working_memory_or_observations_says_so() {
    let f = start(Some(in_memory()), |s| s).await;
    f.post(
        "/memory/threads",
        json!({"resourceId": "alice", "threadId": "t-1"}),
    )
    .await;
    let (status, body) = f
        .post(
            "/memory/threads/t-1/working-memory",
            json!({"workingMemory": "x"}),
        )
        .await;
    assert_eq!(
        (status, error_code(&body)),
        (409, "working_memory_disabled")
    );
    let (status, om) = f
        .get("/memory/observational-memory?threadId=t-1&resourceId=alice")
        .await;
    assert_eq!(status, 200);
    assert_eq!(om, json!({"enabled": false, "observations": []}));
    let (status, missing) = f.get("/memory/observational-memory").await;
    assert_eq!((status, error_code(&missing)), (400, "invalid_query"));

    let (status, st) = f.get("/memory/status?agentId=echo").await;
    assert_eq!(status, 200);
    assert_eq!(st["result"], true);
    assert_eq!(st["config"]["lastMessages"], 10);
    let (status, unknown) = f.get("/memory/status?agentId=nobody").await;
    assert_eq!((status, error_code(&unknown)), (404, "not_found"));
}

#[tokio::test]
async fn a_server_without_memory_answers_no_memory() {
    let f = start(None, |s| s).await;
    let (status, body) = f.get("/memory/threads").await;
    assert_eq!((status, error_code(&body)), (404, "no_memory"));
    let (status, body) = f.get("/memory/status").await;
    assert_eq!(status, 200);
    assert_eq!(body["result"], false);
}

/// Storage given once: the agent's `Memory::default()` and the server's memory routes both
/// use the instance's storage; the server was given no memory.
#[tokio::test]
async fn the_instances_storage_serves_the_memory_routes() {
    let echo = Agent::builder("echo")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text(format!("echo: {last}"))
        })))
        .memory(Memory::default())
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(InMemoryStorage::new())
        .agent(echo)
        .build()
        .unwrap();
    let server = Server::new(kestrel);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let f = Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
        token: None,
    };
    let (status, result) = f
        .post(
            "/agents/echo/generate",
            json!({"messages": "hello", "memory": {"thread": "t-1", "resource": "alice"}}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    let (status, listed) = f.get("/memory/threads/t-1/messages?agentId=echo").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["total"], 2, "{listed}");
    let (status, threads) = f.get("/memory/threads?resourceId=alice").await;
    assert_eq!(status, 200, "{threads}");
    assert_eq!(threads["threads"][0]["id"], "t-1", "{threads}");
}

#[tokio::test]
async fn bad_queries_and_bodies_are_named() {
    let f = start(Some(in_memory()), |s| s).await;
    let cases = [
        ("/memory/threads?perPage=0", "perPage"),
        ("/memory/threads?perPage=5000", "perPage"),
        ("/memory/threads?page=-1", "page"),
        ("/memory/threads?orderBy=title", "orderBy"),
        ("/memory/threads?sortDirection=up", "orderBy[direction]"),
        ("/memory/threads?orderBy%5Bfield%5D=size", "orderBy[field]"),
        ("/memory/threads?metadata=%5B1%5D", "metadata"),
        ("/memory/threads?metadata=nope", "metadata"),
    ];
    for (path, named) in cases {
        let (status, body) = f.get(path).await;
        assert_eq!(status, 400, "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{path}: {message}");
    }
    let (status, body) = f
        .post("/memory/threads", json!({"title": "no owner"}))
        .await;
    assert_eq!((status, error_code(&body)), (422, "invalid_body"));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("resourceId")
    );
    let (status, body) = f.post("/memory/threads", json!({"resourceId": " "})).await;
    assert_eq!((status, error_code(&body)), (422, "invalid_body"));
    let response = f
        .request(reqwest::Method::POST, "/memory/threads")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(error_code(&body), "invalid_json");
    let (status, body) = f.get("/memory/threads?agentId=ghost").await;
    assert_eq!((status, error_code(&body)), (404, "not_found"));
}

#[tokio::test]
async fn a_pinned_caller_reaches_only_its_resources_threads() {
    let memory = in_memory();
    let f = start(Some(memory.clone()), |s| {
        s.token("admin").resource_token("alice-token", "alice")
    })
    .await
    .with_token("admin");
    f.post(
        "/memory/threads",
        json!({"resourceId": "alice", "threadId": "a-1"}),
    )
    .await;
    f.post(
        "/memory/threads",
        json!({"resourceId": "bob", "threadId": "b-1"}),
    )
    .await;
    f.post(
        "/agents/echo/generate",
        json!({"messages": "secret", "memory": {"thread": "b-1", "resource": "bob"}}),
    )
    .await;

    let (status, _) = f.get("/memory/threads").await;
    assert_eq!(status, 200);
    let anonymous = Fixture {
        base: f.base.clone(),
        http: f.http.clone(),
        token: None,
    };
    let (status, body) = anonymous.get("/memory/threads").await;
    assert_eq!((status, error_code(&body)), (401, "unauthorized"));

    let alice = Fixture {
        base: f.base.clone(),
        http: f.http.clone(),
        token: Some("alice-token"),
    };
    let (status, own) = alice.get("/memory/threads").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = own["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a-1"]);
    let (status, body) = alice.get("/memory/threads?resourceId=bob").await;
    assert_eq!((status, error_code(&body)), (403, "forbidden"));
    let (status, body) = alice
        .post(
            "/memory/threads",
            json!({"resourceId": "bob", "threadId": "b-2"}),
        )
        .await;
    assert_eq!((status, error_code(&body)), (403, "forbidden"));
    // Bob's thread is "not found" for Alice, whatever she does with it.
    for (method, path) in [
        (reqwest::Method::GET, "/memory/threads/b-1"),
        (reqwest::Method::GET, "/memory/threads/b-1/messages"),
        (reqwest::Method::GET, "/memory/threads/b-1/working-memory"),
        (reqwest::Method::DELETE, "/memory/threads/b-1"),
        (
            reqwest::Method::GET,
            "/memory/observational-memory?threadId=b-1",
        ),
    ] {
        let (status, body) = alice.send(method.clone(), path, None).await;
        assert_eq!(
            (status, error_code(&body)),
            (404, "not_found"),
            "{method} {path}"
        );
    }
    let (status, _) = alice
        .patch("/memory/threads/b-1", json!({"title": "mine now"}))
        .await;
    assert_eq!(status, 404);
    // Nothing of Bob's changed.
    let thread = memory
        .storage()
        .unwrap()
        .get_thread("b-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(thread.title, None);
    let (status, _) = alice.get("/memory/threads/a-1/messages").await;
    assert_eq!(status, 200);
}

/// The texts of a thread's messages, oldest first.
async fn thread_texts(f: &Fixture, thread: &str) -> Vec<String> {
    let (status, listed) = f.get(&format!("/memory/threads/{thread}/messages")).await;
    assert_eq!(status, 200, "{listed}");
    listed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn send_message_forks_a_thread_into_a_new_one() {
    let f = start(Some(in_memory()), |s| s).await;
    let (status, _) = f
        .post(
            "/agents/echo/generate",
            json!({"messages": "first", "memory": {"thread": "t1", "resource": "ada"}}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, sent) = f
        .post(
            "/agents/echo/send-message",
            json!({"message": "branch", "resourceId": "ada", "threadId": "t1", "fork": true}),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["accepted"], true);
    let fork = sent["threadId"].as_str().unwrap().to_owned();
    assert_ne!(fork, "t1");
    // The woken run goes on in the background: wait for its answer in the fork.
    let mut texts = Vec::new();
    for _ in 0..200 {
        texts = thread_texts(&f, &fork).await;
        if texts.len() == 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(texts, ["first", "echo: first", "branch", "echo: branch"]);
    assert_eq!(thread_texts(&f, "t1").await, ["first", "echo: first"]);

    let (status, sent) = f
        .post(
            "/agents/echo/send-message",
            json!({"message": "note", "resourceId": "ada", "threadId": "t1",
                   "fork": {"threadId": "t1-copy", "title": "Copy"}, "ifIdle": "persist"}),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["threadId"], "t1-copy");
    assert_eq!(sent["runId"], Value::Null);
    assert_eq!(
        thread_texts(&f, "t1-copy").await,
        ["first", "echo: first", "note"]
    );
    let (_, thread) = f.get("/memory/threads/t1-copy").await;
    assert_eq!(thread["title"], "Copy");

    // Another resource's thread is "not found"; a taken id is a conflict; bad bodies are 422.
    let (status, body) = f
        .post(
            "/agents/echo/send-message",
            json!({"message": "x", "resourceId": "eve", "threadId": "t1", "fork": true}),
        )
        .await;
    assert_eq!((status, error_code(&body)), (404, "not_found"), "{body}");
    let (status, body) = f
        .post(
            "/agents/echo/send-message",
            json!({"message": "x", "resourceId": "ada", "threadId": "t1", "fork": {"threadId": "t1-copy"}}),
        )
        .await;
    assert_eq!(
        (status, error_code(&body)),
        (409, "thread_exists"),
        "{body}"
    );
    for fork in [
        json!("yes"),
        json!({"threadId": ""}),
        json!({"thread": "x"}),
    ] {
        let (status, body) = f
            .post(
                "/agents/echo/send-message",
                json!({"message": "x", "resourceId": "ada", "threadId": "t1", "fork": fork}),
            )
            .await;
        assert_eq!(
            (status, error_code(&body)),
            (422, "invalid_body"),
            "{fork}: {body}"
        );
    }
    let (_, listed) = f.get("/memory/threads?resourceId=ada").await;
    assert_eq!(listed["total"], 3, "{listed}");
}

#[tokio::test]
async fn queue_message_runs_on_the_thread_and_bad_queues_are_named() {
    let f = start(Some(in_memory()), |s| s).await;
    let (status, queued) = f
        .post(
            "/agents/echo/queue-message",
            json!({"message": "queued hello", "resourceId": "ada", "threadId": "q1"}),
        )
        .await;
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["accepted"], true);
    assert_eq!(queued["threadId"], "q1");
    assert_eq!(queued["position"], 0);
    assert!(queued["runId"].is_string() && queued["id"].is_string());
    let mut texts = Vec::new();
    for _ in 0..200 {
        texts = thread_texts(&f, "q1").await;
        if texts.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(texts, ["queued hello", "echo: queued hello"]);
    let (status, listed) = f
        .post(
            "/agents/echo/threads/queue",
            json!({"resourceId": "ada", "threadId": "q1"}),
        )
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["messages"], json!([]));
    assert_eq!(listed["activeRunId"], Value::Null);
    let (status, cancelled) = f
        .post(
            "/agents/echo/threads/queue/cancel",
            json!({"resourceId": "ada", "threadId": "q1"}),
        )
        .await;
    assert_eq!((status, &cancelled["cancelled"]), (200, &json!([])));

    for (path, body, want) in [
        (
            "/agents/echo/queue-message",
            json!({"message": "x", "resourceId": "eve", "threadId": "q1"}),
            (404, "not_found"),
        ),
        (
            "/agents/echo/queue-message",
            json!({"message": "x", "resourceId": "ada", "threadId": "q1", "fork": true}),
            (422, "invalid_body"),
        ),
        (
            "/agents/echo/queue-message",
            json!({"resourceId": "ada", "threadId": "q1"}),
            (422, "invalid_body"),
        ),
        (
            "/agents/echo/threads/queue",
            json!({"resourceId": "eve", "threadId": "q1"}),
            (404, "not_found"),
        ),
        (
            "/agents/echo/threads/queue/cancel",
            json!({"resourceId": "ada", "threadId": "q1", "ids": vec!["x"; 101]}),
            (422, "invalid_body"),
        ),
        (
            "/agents/echo/threads/queue/cancel",
            json!({"resourceId": "ada", "threadId": "q1", "all": true}),
            (422, "invalid_body"),
        ),
    ] {
        let (status, error) = f.post(path, body.clone()).await;
        assert_eq!((status, error_code(&error)), want, "{path} {body}: {error}");
    }
}
