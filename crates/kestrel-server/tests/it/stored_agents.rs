//! Stored agents and versions over a real socket, in Mastra's shapes: a stored agent created,
//! described, changed (a new version, published or a draft), run through its published
//! version or a draft chosen in the body; a code agent's versions (only the fields it lets
//! change), published and read back with `?status=` and `?versionId=`; restore, compare,
//! delete; and every bad input with its status and code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ModelRegistry, ScriptedModel, ScriptedResponse, SharedModel};
use kestrel_core::tool::create_tool;
use kestrel_core::version::Editable;
use kestrel_memory::Memory;
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use serde_json::{Value, json};

/// Answers with its system prompt.
fn echo() -> SharedModel {
    Arc::new(ScriptedModel::from_fn(|req| {
        let system = req
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.text())
            .unwrap_or_default();
        ScriptedResponse::text(format!("[{system}]"))
    }))
}

#[derive(Clone)]
struct Fixture {
    base: String,
    http: reqwest::Client,
    token: &'static str,
}

impl Fixture {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
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

    fn with_token(mut self, token: &'static str) -> Self {
        self.token = token;
        self
    }
}

async fn start() -> Fixture {
    let mut models = ModelRegistry::empty();
    models.register("scripted", |_: &str, _: &str| Ok(echo()));
    let writing = Agent::builder("writing")
        .instructions("Write plainly.")
        .model(echo())
        .editable(Editable::instructions())
        .build()
        .unwrap();
    let fixed = Agent::builder("fixed")
        .instructions("Never changes.")
        .model(echo())
        .build()
        .unwrap();
    let lookup = create_tool("lookup")
        .description("Looks up")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async { Ok("found") });
    let memory = Memory::new(Arc::new(InMemoryStorage::new()));
    let kestrel = Kestrel::builder()
        .models(models)
        .agent(writing)
        .agent(fixed)
        .tool(lookup)
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .build()
        .unwrap();
    let server = Server::new(kestrel)
        .memory(memory)
        .token("admin")
        .resource_token("alice-token", "alice")
        .resource_token_with_versions("bob-token", "bob");
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
        token: "admin",
    }
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

async fn generate(f: &Fixture, agent: &str, extra: Value) -> String {
    let mut body = json!({"messages": "hi"});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    let (status, answer) = f.post(&format!("/agents/{agent}/generate"), body).await;
    assert_eq!(status, 200, "{answer}");
    answer["text"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_stored_agent_is_created_changed_and_run_through_its_versions() {
    let f = start().await;
    let (status, created) = f
        .post(
            "/stored/agents",
            json!({
                "name": "Support Agent",
                "instructions": "Help.",
                "model": {"provider": "scripted", "name": "echo"},
                "tools": ["lookup"],
                "agents": ["writing"],
                "metadata": {"team": "care"},
                "changeMessage": "first",
            }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], "support-agent");
    assert_eq!(created["status"], "published");
    assert_eq!(created["source"], "stored");
    assert_eq!(created["instructions"], "Help.");
    assert_eq!(created["model"], "scripted/echo");
    assert_eq!(created["metadata"], json!({"team": "care"}));
    let v1 = created["activeVersionId"].as_str().unwrap().to_owned();
    assert_eq!(created["resolvedVersionId"], v1.as_str());

    // Listed with the agents, and runnable.
    let (_, agents) = f.get("/agents").await;
    assert_eq!(agents["support-agent"]["source"], "stored");
    assert_eq!(agents["support-agent"]["instructions"], "Help.");
    assert!(agents["support-agent"]["tools"]["lookup"].is_object());
    assert!(agents["support-agent"]["tools"]["agent-writing"].is_object());
    assert_eq!(generate(&f, "support-agent", json!({})).await, "[Help.]");

    // A draft: a new version, not published.
    let (status, draft) = f
        .patch(
            "/stored/agents/support-agent",
            json!({"instructions": "Help kindly.", "publishOnSave": false, "changeMessage": "kinder"}),
        )
        .await;
    assert_eq!(status, 200, "{draft}");
    assert_eq!(draft["activeVersionId"], v1.as_str());
    assert_eq!(draft["instructions"], "Help kindly.");
    let v2 = draft["resolvedVersionId"].as_str().unwrap().to_owned();
    assert_eq!(generate(&f, "support-agent", json!({})).await, "[Help.]");
    let drafted = json!({"versions": {"agents": {"support-agent": {"status": "draft"}}}});
    assert_eq!(
        generate(&f, "support-agent", drafted.clone()).await,
        "[Help kindly.]"
    );
    let by_id = json!({"versions": {"agents": {"support-agent": {"versionId": v1}}}});
    assert_eq!(
        generate(&f, "support-agent", by_id.clone()).await,
        "[Help.]"
    );

    // A token pinned to a resource runs published versions only, unless the operator allows
    // it more: a draft, or a version by id, is refused to it.
    let alice = f.clone().with_token("alice-token");
    for chosen in [&drafted, &by_id] {
        let mut body = json!({"messages": "hi"});
        body["versions"] = chosen["versions"].clone();
        let (status, refused) = alice.post("/agents/support-agent/generate", body).await;
        assert_eq!((status, code(&refused)), (403, "forbidden"), "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("published versions only"),
            "{refused}"
        );
    }
    let published_only =
        json!({"versions": {"agents": {"support-agent": {"status": "published"}}}});
    assert_eq!(
        generate(&alice, "support-agent", published_only).await,
        "[Help.]"
    );
    assert_eq!(
        generate(&alice, "support-agent", json!({})).await,
        "[Help.]"
    );
    let bob = f.clone().with_token("bob-token");
    assert_eq!(
        generate(&bob, "support-agent", drafted).await,
        "[Help kindly.]",
        "a pinned token the operator allowed versions runs the draft"
    );
    let (_, published) = f.get("/stored/agents/support-agent").await;
    assert_eq!(published["instructions"], "Help.");
    let (_, latest) = f.get("/stored/agents/support-agent?status=draft").await;
    assert_eq!(latest["instructions"], "Help kindly.");
    let (_, seen) = f.get("/agents/support-agent?status=draft").await;
    assert_eq!(seen["instructions"], "Help kindly.");
    assert_eq!(seen["resolvedVersionId"], v2.as_str());

    // The same fields again: no new version.
    let (_, same) = f
        .patch(
            "/stored/agents/support-agent",
            json!({"instructions": "Help kindly.", "publishOnSave": false}),
        )
        .await;
    assert_eq!(same["resolvedVersionId"], v2.as_str());

    // Versions: listed newest first, compared, published, restored.
    let (_, list) = f.get("/stored/agents/support-agent/versions").await;
    assert_eq!(list["total"], 2);
    assert_eq!(list["hasMore"], false);
    assert_eq!(list["versions"][0]["versionNumber"], 2);
    assert_eq!(
        list["versions"][0]["changedFields"],
        json!(["instructions"])
    );
    assert_eq!(list["versions"][0]["changeMessage"], "kinder");
    let (_, paged) = f
        .get("/stored/agents/support-agent/versions?perPage=1&page=0&orderBy%5Bdirection%5D=ASC")
        .await;
    assert_eq!(paged["versions"][0]["versionNumber"], 1);
    assert_eq!(paged["hasMore"], true);
    let (_, diff) = f
        .get(&format!(
            "/stored/agents/support-agent/versions/compare?from={v1}&to={v2}"
        ))
        .await;
    assert_eq!(
        diff["diffs"],
        json!([{"field": "instructions", "previousValue": "Help.", "currentValue": "Help kindly."}])
    );
    assert_eq!(diff["toVersion"]["versionNumber"], 2);
    let (status, activated) = f
        .post(
            &format!("/stored/agents/support-agent/versions/{v2}/activate"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{activated}");
    assert_eq!(activated["activeVersionId"], v2.as_str());
    assert_eq!(
        generate(&f, "support-agent", json!({})).await,
        "[Help kindly.]"
    );
    let (status, restored) = f
        .post(
            &format!("/stored/agents/support-agent/versions/{v1}/restore"),
            json!({}),
        )
        .await;
    assert_eq!(status, 201, "{restored}");
    assert_eq!(restored["versionNumber"], 3);
    assert_eq!(restored["instructions"], "Help.");
    assert_eq!(restored["changeMessage"], "Restored from version 1");
    // The published version cannot be deleted; another can.
    let (status, body) = f
        .delete(&format!("/stored/agents/support-agent/versions/{v2}"))
        .await;
    assert_eq!((status, code(&body)), (409, "version_published"));
    let (status, _) = f
        .delete(&format!("/stored/agents/support-agent/versions/{v1}"))
        .await;
    assert_eq!(status, 200);
    let (status, _) = f
        .get(&format!("/stored/agents/support-agent/versions/{v1}"))
        .await;
    assert_eq!(status, 404);

    // Listed among stored agents; deleted, gone.
    let (_, stored) = f.get("/stored/agents").await;
    assert_eq!(stored["total"], 1);
    assert_eq!(stored["agents"][0]["id"], "support-agent");
    let (_, drafts) = f.get("/stored/agents?status=draft").await;
    assert_eq!(drafts["total"], 0);
    let (status, _) = f.delete("/stored/agents/support-agent").await;
    assert_eq!(status, 200);
    let (status, body) = f.get("/agents/support-agent").await;
    assert_eq!((status, code(&body)), (404, "not_found"));
}

#[tokio::test]
async fn a_code_agents_versions_change_only_what_it_lets_change() {
    let f = start().await;
    // No versions yet: the agent as written.
    let (_, writing) = f.get("/agents/writing").await;
    assert_eq!(writing["instructions"], "Write plainly.");
    assert_eq!(writing["source"], "code");
    assert_eq!(writing["editable"]["instructions"], true);
    assert_eq!(writing["editable"]["model"], false);
    let (_, fixed) = f.get("/agents/fixed").await;
    assert_eq!(fixed["editable"], Value::Null);
    let (status, _) = f.get("/stored/agents/writing").await;
    assert_eq!(status, 404);
    let (_, empty) = f.get("/stored/agents/writing/versions").await;
    assert_eq!(empty["total"], 0);

    // A draft of a code agent creates its record, unpublished.
    let (status, v1) = f
        .post(
            "/stored/agents/writing/versions",
            json!({"instructions": "Write like a pirate.", "changeMessage": "arr"}),
        )
        .await;
    assert_eq!(status, 201, "{v1}");
    assert_eq!(v1["versionNumber"], 1);
    assert_eq!(v1["agentId"], "writing");
    let v1 = v1["id"].as_str().unwrap().to_owned();
    let (_, record) = f.get("/stored/agents/writing").await;
    assert_eq!(record["source"], "code");
    assert_eq!(record["activeVersionId"], Value::Null);
    assert_eq!(generate(&f, "writing", json!({})).await, "[Write plainly.]");
    let drafted = json!({"versions": {"agents": {"writing": {"status": "draft"}}}});
    assert_eq!(
        generate(&f, "writing", drafted).await,
        "[Write like a pirate.]"
    );
    let (_, seen) = f.get("/agents/writing?status=draft").await;
    assert_eq!(seen["instructions"], "Write like a pirate.");
    let (_, seen) = f.get(&format!("/agents/writing?versionId={v1}")).await;
    assert_eq!(seen["instructions"], "Write like a pirate.");
    let (_, published) = f.get("/agents/writing").await;
    assert_eq!(published["instructions"], "Write plainly.");

    // Published: the default for runs and descriptions.
    let (status, _) = f
        .post(
            &format!("/stored/agents/writing/versions/{v1}/activate"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        generate(&f, "writing", json!({})).await,
        "[Write like a pirate.]"
    );
    let (_, published) = f.get("/agents/writing").await;
    assert_eq!(published["instructions"], "Write like a pirate.");
    assert_eq!(published["resolvedVersionId"], v1.as_str());

    // Fields the agent keeps are refused, naming them.
    let (status, body) = f
        .post(
            "/stored/agents/writing/versions",
            json!({"model": "scripted/other"}),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "not_editable"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("model"));
    let (status, body) = f
        .post(
            "/stored/agents/fixed/versions",
            json!({"instructions": "x"}),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "not_editable"), "{body}");
}

#[tokio::test]
async fn bad_input_gets_typed_errors() {
    let f = start().await;
    let create = |body: Value| f.post("/stored/agents", body);
    // A code agent's id, a taken id, unknown tools, sub-agents and models, unknown fields.
    let (status, body) = create(json!({"id": "writing", "instructions": "x"})).await;
    assert_eq!((status, code(&body)), (409, "agent_exists"));
    let model = json!("scripted/echo");
    let (status, _) = create(json!({"id": "a", "instructions": "x", "model": model})).await;
    assert_eq!(status, 201);
    let (status, body) = create(json!({"id": "a", "instructions": "x", "model": model})).await;
    assert_eq!((status, code(&body)), (409, "agent_exists"));
    for (field, value, named) in [
        ("tools", json!(["missing"]), "missing"),
        ("agents", json!(["nobody"]), "nobody"),
        ("model", json!("nowhere/x"), "nowhere"),
    ] {
        let mut body = json!({"id": "b", "instructions": "x", "model": model});
        body[field] = value;
        let (status, body) = create(body).await;
        assert_eq!((status, code(&body)), (422, "invalid_version"), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(named));
    }
    let (status, body) = create(json!({"id": "b", "instructionz": "x"})).await;
    assert_eq!((status, code(&body)), (422, "invalid_body"), "{body}");
    let (status, body) = create(json!({"name": "¿?", "instructions": "x"})).await;
    assert_eq!((status, code(&body)), (422, "invalid_body"), "{body}");
    let (status, body) = create(json!({
        "id": "b", "instructions": "x", "model": model, "defaultOptions": {"maxSteps": 0},
    }))
    .await;
    assert_eq!((status, code(&body)), (422, "invalid_body"), "{body}");

    // Another agent's version, unknown agents and versions.
    let (_, versions) = f.get("/stored/agents/a/versions").await;
    let a1 = versions["versions"][0]["id"].as_str().unwrap().to_owned();
    let (status, _) = f
        .post(
            &format!("/stored/agents/writing/versions/{a1}/activate"),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = f.get("/stored/agents/ghost").await;
    assert_eq!(status, 404);
    let (status, _) = f
        .post(
            "/stored/agents/ghost/versions",
            json!({"instructions": "x"}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = f
        .patch("/stored/agents/ghost", json!({"instructions": "x"}))
        .await;
    assert_eq!(status, 404);
    let (status, _) = f.delete("/stored/agents/ghost").await;
    assert_eq!(status, 404);
    let (status, body) = f.get("/agents/writing?versionId=nope").await;
    assert_eq!((status, code(&body)), (404, "not_found"));
    let (status, body) = f.get("/agents/writing?status=draft&versionId=x").await;
    assert_eq!((status, code(&body)), (400, "invalid_query"));
    let (status, body) = f.get("/agents/writing?status=old").await;
    assert_eq!((status, code(&body)), (400, "invalid_query"));
    let unknown =
        json!({"messages": "hi", "versions": {"agents": {"writing": {"versionId": "nope"}}}});
    let (status, body) = f.post("/agents/writing/generate", unknown).await;
    assert_eq!((status, code(&body)), (404, "version_not_found"), "{body}");
    let (status, body) = f
        .post(
            "/agents/writing/generate",
            json!({"messages": "hi", "versions": {"agents": {"writing": {"status": "old"}}}}),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid_body"), "{body}");
    let (status, body) = f
        .post(
            "/stored/agents/a/versions",
            json!({"tools": [" "], "instructions": "x"}),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid_body"), "{body}");
    // Saved and published at once.
    let (status, saved) = f
        .post(
            "/stored/agents/a/versions",
            json!({"instructions": "y", "publishOnSave": true}),
        )
        .await;
    assert_eq!(status, 201, "{saved}");
    let (_, a) = f.get("/stored/agents/a").await;
    assert_eq!(a["activeVersionId"], saved["id"]);

    // A token pinned to a resource reads, but does not change agents.
    let alice = f.with_token("alice-token");
    let (status, _) = alice.get("/stored/agents/a").await;
    assert_eq!(status, 200);
    let (status, body) = alice
        .patch("/stored/agents/a", json!({"instructions": "pwned"}))
        .await;
    assert_eq!((status, code(&body)), (403, "forbidden"));
    let (status, _) = alice
        .post(
            "/stored/agents/writing/versions",
            json!({"instructions": "pwned"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = alice.delete("/stored/agents/a").await;
    assert_eq!(status, 403);
}
