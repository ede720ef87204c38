//! The workflow routes over a real socket: list and describe, create a run, stream it in
//! Mastra's record format, start it with and without waiting, suspend and resume (checked and
//! claimed once), cancel, list, read and delete runs, bad input, runs kept per resource, and
//! the runs continued in other ways: restarted, nested, foreach items, time travel.
//!
//! This module holds the workflows and the client the tests share.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;
mod continued;
mod errors;
mod runs;

use std::time::Duration;

use kestrel_core::kestrel::Kestrel;
use kestrel_core::workflow::{Workflow, create_step};
use kestrel_server::Server;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, Serialize, JsonSchema)]
pub(super) struct N {
    v: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Pair {
    a: N,
    b: N,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub(super) struct Approval {
    approved: bool,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Decided {
    approved: bool,
    v: i64,
}

/// `numbers`: s1 (v + 1) → parallel(a: v × 2, b: v × 3) → sum. `gate`: `ask` suspends for
/// `{approved}`, then `after`. `slow`: `wait` waits for its abort signal (or 30 s).
/// `wrapped`: `lift` (v + 100), then the nested workflow `checks`, whose `check` suspends
/// for `{approved}`. `batch`: a foreach over integers whose odd items suspend for
/// `{approved}`.
pub(crate) fn workflows() -> Vec<Workflow> {
    let s1 = create_step("s1")
        .description("Adds one")
        .execute(|n: N, _ctx| async move { Ok(N { v: n.v + 1 }) });
    let a = create_step("a").execute(|n: N, _ctx| async move { Ok(N { v: n.v * 2 }) });
    let b = create_step("b").execute(|n: N, _ctx| async move { Ok(N { v: n.v * 3 }) });
    let sum = create_step("sum").execute(|p: Pair, _ctx| async move { Ok(N { v: p.a.v + p.b.v }) });
    let numbers = Workflow::builder("numbers")
        .description("Adds and multiplies")
        .then(s1)
        .parallel([a, b])
        .then(sum)
        .commit()
        .unwrap();
    let ask = create_step("ask")
        .resume_type::<Approval>()
        .execute(|n: N, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": "approve?"}))),
                Some(data) => Ok(Decided {
                    approved: data["approved"].as_bool().unwrap_or(false),
                    v: n.v,
                }),
            }
        });
    let after = create_step("after")
        .execute(|d: Decided, _ctx| async move { Ok(json!({"done": d.approved, "v": d.v})) });
    let gate = Workflow::builder("gate")
        .then(ask)
        .then(after)
        .commit()
        .unwrap();
    let wait = create_step("wait").execute(|n: N, ctx| async move {
        tokio::select! {
            () = ctx.abort_signal().aborted() => {}
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
        }
        Ok(n)
    });
    let slow = Workflow::builder("slow").then(wait).commit().unwrap();
    let check = create_step("check")
        .resume_type::<Approval>()
        .execute(|n: N, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": "sure?"}))),
                Some(data) => Ok(json!({"v": n.v, "sure": data["approved"]})),
            }
        });
    let checks = Workflow::builder("checks").then(check).commit().unwrap();
    let lift = create_step("lift").execute(|n: N, _ctx| async move { Ok(N { v: n.v + 100 }) });
    let wrapped = Workflow::builder("wrapped")
        .then(lift)
        .then(checks)
        .commit()
        .unwrap();
    let item = create_step("item")
        .resume_type::<Approval>()
        .execute(|v: i64, ctx| async move {
            match ctx.resume_data() {
                None if v % 2 == 1 => Err(ctx.suspend(json!({"item": v}))),
                None => Ok(json!(v)),
                Some(data) => Ok(json!(if data["approved"] == true { v * 10 } else { 0 })),
            }
        });
    let batch = Workflow::builder("batch")
        .foreach(item, 2)
        .commit()
        .unwrap();
    vec![numbers, gate, slow, wrapped, batch]
}

pub(super) struct Fixture {
    pub(super) base: String,
    pub(super) http: reqwest::Client,
}

pub(super) async fn serve(configure: impl FnOnce(Server) -> Server) -> Fixture {
    serve_with(|builder| builder, configure).await
}

/// [`serve`], with the instance's builder changed first (a cluster, say).
pub(super) async fn serve_with(
    build: impl FnOnce(kestrel_core::kestrel::KestrelBuilder) -> kestrel_core::kestrel::KestrelBuilder,
    configure: impl FnOnce(Server) -> Server,
) -> Fixture {
    let mut builder = Kestrel::builder();
    for workflow in workflows() {
        builder = builder.workflow(workflow);
    }
    let server = configure(Server::new(build(builder).build().unwrap()));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
    }
}

impl Fixture {
    pub(super) async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub(super) async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    pub(super) async fn ok(&self, response: reqwest::Response) -> Value {
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }

    pub(super) async fn create_run(&self, workflow: &str) -> String {
        let created = self
            .ok(self
                .post(&format!("/workflows/{workflow}/create-run"), json!({}))
                .await)
            .await;
        created["runId"].as_str().unwrap().to_owned()
    }

    /// A run of `gate` on `{v}`, suspended at `ask`.
    pub(super) async fn suspended_gate(&self, v: i64) -> String {
        let run_id = self.create_run("gate").await;
        let path = format!("/workflows/gate/start-async?runId={run_id}");
        let started = self
            .ok(self.post(&path, json!({"inputData": {"v": v}})).await)
            .await;
        assert_eq!(started["status"], "suspended");
        run_id
    }

    /// The records of the stream `path` answers `body` with.
    pub(super) async fn stream(&self, path: &str, body: Value) -> Vec<Value> {
        records(self.post(path, body).await).await
    }

    /// The run's stored status, once it is `status` (runs started in the background).
    pub(super) async fn wait_for(&self, workflow: &str, run_id: &str, status: &str) -> Value {
        for _ in 0..200 {
            let run = self
                .ok(self
                    .get(&format!("/workflows/{workflow}/runs/{run_id}"))
                    .await)
                .await;
            if run["status"] == status {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("run {run_id} never became {status}");
    }
}

/// The records of a workflow stream: checks Mastra's format (text/plain, each record JSON
/// followed by `\x1E`, no `[DONE]`).
pub(super) async fn records(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text().await.unwrap();
    assert!(
        text.ends_with('\u{1e}'),
        "every record ends with the separator: {text:?}"
    );
    assert!(!text.contains("[DONE]"));
    text.split_terminator('\u{1e}')
        .map(|record| serde_json::from_str(record).unwrap())
        .collect()
}

pub(super) fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

pub(super) async fn error_of(response: reqwest::Response, status: u16, code: &str) -> String {
    let got = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (got, body["error"]["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    body["error"]["message"].as_str().unwrap().to_owned()
}

pub(super) fn schema(text: &Value) -> Value {
    let parsed: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
    parsed["json"].clone()
}
