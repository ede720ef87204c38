//! The workflow routes over a real socket: list and describe, create a run, stream it in
//! Mastra's record format, start it with and without waiting, suspend and resume (checked and
//! claimed once), cancel, list, read and delete runs, bad input, and runs kept per resource.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use kestrel_core::kestrel::Kestrel;
use kestrel_core::workflow::{Workflow, create_step};
use kestrel_server::Server;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, Serialize, JsonSchema)]
struct N {
    v: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Pair {
    a: N,
    b: N,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Approval {
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

struct Fixture {
    base: String,
    http: reqwest::Client,
}

async fn serve(configure: impl FnOnce(Server) -> Server) -> Fixture {
    let mut builder = Kestrel::builder();
    for workflow in workflows() {
        builder = builder.workflow(workflow);
    }
    let server = configure(Server::new(builder.build().unwrap()));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
    }
}

impl Fixture {
    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    async fn ok(&self, response: reqwest::Response) -> Value {
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }

    async fn create_run(&self, workflow: &str) -> String {
        let created = self
            .ok(self
                .post(&format!("/workflows/{workflow}/create-run"), json!({}))
                .await)
            .await;
        created["runId"].as_str().unwrap().to_owned()
    }

    /// A run of `gate` on `{v}`, suspended at `ask`.
    async fn suspended_gate(&self, v: i64) -> String {
        let run_id = self.create_run("gate").await;
        let path = format!("/workflows/gate/start-async?runId={run_id}");
        let started = self
            .ok(self.post(&path, json!({"inputData": {"v": v}})).await)
            .await;
        assert_eq!(started["status"], "suspended");
        run_id
    }

    /// The records of the stream `path` answers `body` with.
    async fn stream(&self, path: &str, body: Value) -> Vec<Value> {
        records(self.post(path, body).await).await
    }

    /// The run's stored status, once it is `status` (runs started in the background).
    async fn wait_for(&self, workflow: &str, run_id: &str, status: &str) -> Value {
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
async fn records(response: reqwest::Response) -> Vec<Value> {
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

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

async fn error_of(response: reqwest::Response, status: u16, code: &str) -> String {
    let got = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (got, body["error"]["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    body["error"]["message"].as_str().unwrap().to_owned()
}

fn schema(text: &Value) -> Value {
    let parsed: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
    parsed["json"].clone()
}

#[tokio::test]
async fn workflows_are_listed_and_described_as_mastra_does() {
    let f = serve(|s| s).await;
    let all = f.ok(f.get("/workflows").await).await;
    let mut ids: Vec<&String> = all.as_object().unwrap().keys().collect();
    ids.sort();
    assert_eq!(ids, ["batch", "gate", "numbers", "slow", "wrapped"]);
    let numbers = f.ok(f.get("/workflows/numbers").await).await;
    assert_eq!(numbers["name"], "numbers");
    assert_eq!(numbers["description"], "Adds and multiplies");
    // Schemas are JSON strings of `{"json": schema}`, as Mastra (superjson) gives them.
    assert_eq!(schema(&numbers["inputSchema"])["required"], json!(["v"]));
    assert_eq!(numbers["steps"]["s1"]["description"], "Adds one");
    assert_eq!(
        schema(&numbers["steps"]["sum"]["inputSchema"])["required"],
        json!(["a", "b"])
    );
    let graph: Vec<&str> = numbers["stepGraph"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(graph, ["step", "parallel", "step"]);
    assert_eq!(numbers["stepGraph"][1]["steps"][1]["step"]["id"], "b");
    let gate = f.ok(f.get("/workflows/gate").await).await;
    assert_eq!(
        schema(&gate["steps"]["ask"]["resumeSchema"])["required"],
        json!(["approved"])
    );
    assert_eq!(gate["stepGraph"][0]["step"]["canSuspend"], true);
    let partial = f.ok(f.get("/workflows?partial=true").await).await;
    assert_eq!(partial["numbers"]["stepCount"], 4);
    assert_eq!(partial["numbers"]["steps"], json!({}));
    let missing = error_of(f.get("/workflows/ghost").await, 404, "not_found").await;
    assert!(missing.contains("ghost"), "{missing}");
}

#[tokio::test]
async fn a_created_run_streams_in_mastras_record_format_and_starts_once() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("numbers").await;
    let pending = f
        .ok(f.get(&format!("/workflows/numbers/runs/{run_id}")).await)
        .await;
    assert_eq!(pending["status"], "pending");
    let events = f
        .stream(
            &format!("/workflows/numbers/stream?runId={run_id}"),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    assert_eq!(
        types(&events),
        [
            "workflow-start",
            "workflow-step-start",
            "workflow-step-result",
            "workflow-step-start",
            "workflow-step-start",
            "workflow-step-result",
            "workflow-step-result",
            "workflow-step-start",
            "workflow-step-result",
            "workflow-finish",
        ]
    );
    for event in &events {
        assert_eq!(event["runId"], run_id.as_str());
        assert_eq!(event["from"], "WORKFLOW");
    }
    let finish = events.last().unwrap();
    assert_eq!(finish["payload"]["workflowStatus"], "success");
    // s1: 2; a: 4, b: 6; sum: 10.
    assert_eq!(events[8]["payload"]["output"], json!({"v": 10}));
    let run = f
        .ok(f.get(&format!("/workflows/numbers/runs/{run_id}")).await)
        .await;
    assert_eq!(run["status"], "success");
    assert_eq!(run["result"], json!({"v": 10}));
    assert_eq!(run["payload"], json!({"v": 1}));
    assert_eq!(run["steps"]["b"]["output"], json!({"v": 6}));
    assert!(run["createdAt"].as_str().unwrap().ends_with('Z'), "{run}");
    // A run starts once: a second start of the same id is a conflict.
    let again = f
        .post(
            &format!("/workflows/numbers/stream?runId={run_id}"),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    error_of(again, 409, "already_started").await;
}

#[tokio::test]
async fn start_async_answers_with_the_result_and_start_does_not_wait() {
    let f = serve(|s| s).await;
    let result = f
        .ok(f
            .post(
                "/workflows/numbers/start-async",
                json!({"inputData": {"v": 2}}),
            )
            .await)
        .await;
    assert_eq!(result["status"], "success");
    assert_eq!(result["result"], json!({"v": 15}));
    assert_eq!(result["steps"]["s1"]["output"], json!({"v": 3}));
    let run_id = f.create_run("slow").await;
    let started = f
        .ok(f
            .post(
                &format!("/workflows/slow/start?runId={run_id}"),
                json!({"inputData": {"v": 1}}),
            )
            .await)
        .await;
    assert_eq!(started["message"], "Workflow run started");
    f.wait_for("slow", &run_id, "running").await;
    let counts = f.ok(f.get("/workflows/run-counts").await).await;
    assert_eq!(counts["slow"], json!({"running": 1, "suspended": 0}));
    // A run in progress is not deleted from under itself.
    let busy = f
        .http
        .delete(format!("{}/workflows/slow/runs/{run_id}", f.base))
        .send()
        .await
        .unwrap();
    error_of(busy, 409, "run_in_progress").await;
    // Canceling it reaches the run going on (through its abort signal).
    let canceled = f
        .ok(f
            .post(&format!("/workflows/slow/runs/{run_id}/cancel"), json!({}))
            .await)
        .await;
    assert_eq!(canceled["message"], "Workflow run cancelled");
    f.wait_for("slow", &run_id, "canceled").await;
    let again = f
        .post(&format!("/workflows/slow/runs/{run_id}/cancel"), json!({}))
        .await;
    error_of(again, 409, "run_ended").await;
    let fields = f
        .ok(f
            .get(&format!("/workflows/slow/runs/{run_id}?fields=payload"))
            .await)
        .await;
    assert_eq!(fields["payload"], json!({"v": 1}));
    assert!(
        fields.get("steps").is_none(),
        "only the fields asked for: {fields}"
    );
    let deleted = f
        .http
        .delete(format!("{}/workflows/slow/runs/{run_id}", f.base))
        .send()
        .await
        .unwrap();
    assert_eq!(f.ok(deleted).await["message"], "Workflow run deleted");
    error_of(
        f.get(&format!("/workflows/slow/runs/{run_id}")).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_suspended_run_is_resumed_once_with_checked_data() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("gate").await;
    let events = f
        .stream(
            &format!("/workflows/gate/stream?runId={run_id}"),
            json!({"inputData": {"v": 7}}),
        )
        .await;
    assert_eq!(
        types(&events),
        [
            "workflow-start",
            "workflow-step-start",
            "workflow-step-suspended",
            "workflow-finish"
        ]
    );
    assert_eq!(
        events[2]["payload"]["suspendPayload"],
        json!({"question": "approve?"})
    );
    assert_eq!(events[3]["payload"]["workflowStatus"], "suspended");
    let listed = f
        .ok(f.get("/workflows/gate/runs?status=suspended").await)
        .await;
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["runs"][0]["runId"], run_id.as_str());
    assert_eq!(
        listed["runs"][0]["snapshot"]["suspendedPaths"],
        json!({"ask": [0]})
    );
    assert_eq!(
        listed["runs"][0]["snapshot"]["context"]["input"],
        json!({"v": 7})
    );
    let resume = format!("/workflows/gate/resume-async?runId={run_id}");
    let bad = f
        .post(
            &resume,
            json!({"step": "ask", "resumeData": {"approved": "yes"}}),
        )
        .await;
    let message = error_of(bad, 422, "invalid_resume_data").await;
    assert!(message.contains("approved"), "{message}");
    let wrong = f
        .post(
            &resume,
            json!({"step": "after", "resumeData": {"approved": true}}),
        )
        .await;
    error_of(wrong, 409, "not_suspended_step").await;
    // Two resumers at once: one runs the rest, the other is told it lost.
    let body = json!({"step": ["ask"], "resumeData": {"approved": true}});
    let (one, two) = tokio::join!(f.post(&resume, body.clone()), f.post(&resume, body.clone()));
    let mut statuses = [one.status().as_u16(), two.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409]);
    let run = f.wait_for("gate", &run_id, "success").await;
    assert_eq!(run["result"], json!({"done": true, "v": 7}));
    assert_eq!(
        run["steps"]["ask"]["resumePayload"],
        json!({"approved": true})
    );
    error_of(f.post(&resume, body).await, 409, "not_suspended").await;
}

#[tokio::test]
async fn resume_stream_streams_the_rest_and_the_background_forms_answer_at_once() {
    let f = serve(|s| s).await;
    let first = f.suspended_gate(1).await;
    let events = f
        .stream(
            &format!("/workflows/gate/resume-stream?runId={first}"),
            json!({"resumeData": {"approved": false}}),
        )
        .await;
    let kinds = types(&events);
    assert_eq!(kinds.first(), Some(&"workflow-start"));
    assert_eq!(kinds.last(), Some(&"workflow-finish"));
    let resumed = events
        .iter()
        .find(|e| e["type"] == "workflow-step-start")
        .unwrap();
    assert_eq!(
        resumed["payload"]["resumePayload"],
        json!({"approved": false})
    );
    assert_eq!(
        events.last().unwrap()["payload"]["workflowStatus"],
        "success"
    );
    let second = f.suspended_gate(2).await;
    let no_wait = f
        .ok(f
            .post(
                &format!("/workflows/gate/resume-no-wait?runId={second}"),
                json!({"resumeData": {"approved": true}}),
            )
            .await)
        .await;
    assert_eq!(no_wait["runId"], second.as_str());
    f.wait_for("gate", &second, "success").await;
    // A suspended run can be canceled too.
    let third = f.suspended_gate(3).await;
    f.ok(f
        .post(&format!("/workflows/gate/runs/{third}/cancel"), json!({}))
        .await)
        .await;
    f.wait_for("gate", &third, "canceled").await;
    let resume = f
        .post(
            &format!("/workflows/gate/resume?runId={third}"),
            json!({"resumeData": {"approved": true}}),
        )
        .await;
    error_of(resume, 409, "not_suspended").await;
}

#[tokio::test]
async fn bad_requests_are_typed_errors_that_name_the_problem() {
    let f = serve(|s| s).await;
    let message = error_of(
        f.post(
            "/workflows/numbers/start-async",
            json!({"inputData": {"v": "one"}}),
        )
        .await,
        422,
        "invalid_input",
    )
    .await;
    assert!(
        message.contains("/v") || message.contains("\"v\""),
        "{message}"
    );
    error_of(
        f.post("/workflows/ghost/start-async", json!({})).await,
        404,
        "not_found",
    )
    .await;
    error_of(
        f.post(
            "/workflows/numbers/stream",
            json!({"inputData": {"v": 1}, "perStep": true}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    error_of(
        f.post(
            "/workflows/numbers/start-async",
            json!({"inputData": {"v": 1}, "initialState": 3}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    error_of(
        f.post(
            "/workflows/numbers/stream?runId=a%01b",
            json!({"inputData": {"v": 1}}),
        )
        .await,
        400,
        "invalid_query",
    )
    .await;
    error_of(
        f.post("/workflows/gate/resume-async", json!({"resumeData": {}}))
            .await,
        400,
        "invalid_query",
    )
    .await;
    error_of(
        f.post(
            "/workflows/gate/resume-async?runId=nope",
            json!({"resumeData": {}}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    error_of(
        f.post(
            "/workflows/gate/resume-async?runId=x",
            json!({"step": ["a", "b"]}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    error_of(
        f.get("/workflows/numbers/runs?status=lost").await,
        400,
        "invalid_query",
    )
    .await;
    error_of(
        f.get("/workflows/numbers/runs?perPage=5000").await,
        400,
        "invalid_query",
    )
    .await;
    error_of(
        f.get("/workflows/numbers/runs?limit=1001").await,
        400,
        "invalid_query",
    )
    .await;
    error_of(
        f.get("/workflows/numbers/runs?fromDate=2026-01-01").await,
        400,
        "invalid_query",
    )
    .await;
    let run_id = f.create_run("numbers").await;
    error_of(
        f.get(&format!(
            "/workflows/numbers/runs/{run_id}?fields=result,secrets"
        ))
        .await,
        400,
        "invalid_query",
    )
    .await;
    // A step path that leads nowhere names the steps that wait, on a run that exists.
    let gate = f.suspended_gate(1).await;
    let nowhere = error_of(
        f.post(
            &format!("/workflows/gate/resume-async?runId={gate}"),
            json!({"step": ["ask", "deeper"], "resumeData": {"approved": true}}),
        )
        .await,
        409,
        "not_suspended_step",
    )
    .await;
    assert!(nowhere.contains("deeper"), "{nowhere}");
}

#[tokio::test]
async fn runs_are_paged_and_filtered() {
    let f = serve(|s| s).await;
    for v in 0..5 {
        f.ok(f
            .post(
                "/workflows/numbers/start-async",
                json!({"inputData": {"v": v}}),
            )
            .await)
            .await;
    }
    let page = f
        .ok(f.get("/workflows/numbers/runs?page=1&perPage=2").await)
        .await;
    assert_eq!(page["total"], 5);
    assert_eq!(page["runs"].as_array().unwrap().len(), 2);
    let by_limit = f
        .ok(f.get("/workflows/numbers/runs?limit=2&offset=4").await)
        .await;
    assert_eq!(by_limit["runs"].as_array().unwrap().len(), 1);
    // An offset inside a page: the runs after it, across the page's end, newest first.
    let all_ids = |page: &Value| -> Vec<String> {
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["runId"].as_str().unwrap().to_owned())
            .collect()
    };
    let everything = all_ids(&f.ok(f.get("/workflows/numbers/runs").await).await);
    let shifted = f
        .ok(f.get("/workflows/numbers/runs?limit=2&offset=1").await)
        .await;
    assert_eq!(all_ids(&shifted), everything[1..3]);
    let paged = f
        .ok(f
            .get("/workflows/numbers/runs?page=1&perPage=2&offset=1")
            .await)
        .await;
    assert_eq!(all_ids(&paged), everything[3..5]);
    let all = f
        .ok(f.get("/workflows/numbers/runs?limit=false").await)
        .await;
    assert_eq!(all["runs"].as_array().unwrap().len(), 5);
    for run in all["runs"].as_array().unwrap() {
        assert_eq!(run["workflowName"], "numbers");
        assert_eq!(run["snapshot"]["status"], "success");
    }
    let none = f
        .ok(f.get("/workflows/numbers/runs?status=suspended").await)
        .await;
    assert_eq!(none["total"], 0);
}

#[tokio::test]
async fn a_caller_pinned_to_a_resource_reaches_only_its_own_runs() {
    let f = serve(|s| {
        s.resource_token("alice-token", "alice")
            .resource_token("bob-token", "bob")
    })
    .await;
    let as_who = |token: &'static str| {
        let http = f.http.clone();
        let base = f.base.clone();
        move |method: reqwest::Method, path: String, body: Value| {
            let http = http.clone();
            let base = base.clone();
            async move {
                http.request(method, format!("{base}{path}"))
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await
                    .unwrap()
            }
        }
    };
    let alice = as_who("alice-token");
    let bob = as_who("bob-token");
    let created = f
        .ok(alice(
            reqwest::Method::POST,
            "/workflows/gate/create-run".into(),
            json!({}),
        )
        .await)
        .await;
    let run_id = created["runId"].as_str().unwrap().to_owned();
    let started = alice(
        reqwest::Method::POST,
        format!("/workflows/gate/start-async?runId={run_id}"),
        json!({"inputData": {"v": 1}}),
    )
    .await;
    assert_eq!(f.ok(started).await["status"], "suspended");
    // Bob neither sees, resumes, cancels nor deletes Alice's run.
    for (method, path) in [
        (
            reqwest::Method::GET,
            format!("/workflows/gate/runs/{run_id}"),
        ),
        (
            reqwest::Method::POST,
            format!("/workflows/gate/resume-async?runId={run_id}"),
        ),
        (
            reqwest::Method::POST,
            format!("/workflows/gate/runs/{run_id}/cancel"),
        ),
        (
            reqwest::Method::DELETE,
            format!("/workflows/gate/runs/{run_id}"),
        ),
    ] {
        let response = bob(
            method,
            path.clone(),
            json!({"resumeData": {"approved": true}}),
        )
        .await;
        assert_eq!(response.status(), 404, "{path}");
    }
    let taken = bob(
        reqwest::Method::POST,
        format!("/workflows/gate/stream?runId={run_id}"),
        json!({"inputData": {"v": 1}}),
    )
    .await;
    error_of(taken, 409, "run_id_taken").await;
    let listed = f
        .ok(bob(
            reqwest::Method::GET,
            "/workflows/gate/runs".into(),
            json!({}),
        )
        .await)
        .await;
    assert_eq!(listed["total"], 0);
    let forbidden = bob(
        reqwest::Method::GET,
        "/workflows/gate/runs?resourceId=alice".into(),
        json!({}),
    )
    .await;
    error_of(forbidden, 403, "forbidden").await;
    let own = f
        .ok(alice(
            reqwest::Method::GET,
            "/workflows/gate/runs".into(),
            json!({}),
        )
        .await)
        .await;
    assert_eq!(own["runs"][0]["resourceId"], "alice");
    let resumed = alice(
        reqwest::Method::POST,
        format!("/workflows/gate/resume-async?runId={run_id}"),
        json!({"resumeData": {"approved": true}}),
    )
    .await;
    assert_eq!(f.ok(resumed).await["status"], "success");
}

/// `hang`: `first`, then `second`, which never ends when `stuck` (the process dies in it).
fn hanging(stuck: bool) -> Workflow {
    let first = create_step("first").execute(|n: N, _ctx| async move { Ok(N { v: n.v + 1 }) });
    let second = create_step("second").execute(move |n: N, _ctx| async move {
        if stuck {
            std::future::pending::<()>().await;
        }
        Ok(N { v: n.v * 10 })
    });
    Workflow::builder("hang")
        .then(first)
        .then(second)
        .commit()
        .unwrap()
}

#[tokio::test]
async fn a_run_left_behind_is_restarted_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let storage: std::sync::Arc<dyn kestrel_storage::Storage> = std::sync::Arc::new(
        kestrel_storage::SqliteStorage::open(dir.path().join("runs.db"))
            .await
            .unwrap(),
    );
    let on = |stuck: bool| {
        let memory = kestrel_memory::Memory::new(std::sync::Arc::clone(&storage));
        Kestrel::builder()
            .memory(memory)
            .workflow(hanging(stuck))
            .workflow(workflows().remove(1))
            .build()
            .unwrap()
    };
    // A process that dies in `second`.
    let dying = on(true);
    let run = dying.workflow("hang").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    let probe = dying.workflow("hang").unwrap().create_run_with_id(&run_id);
    while probe
        .snapshot()
        .await
        .unwrap()
        .is_none_or(|s| s.position == 0)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
    let _ = task.await;
    drop(dying);

    let server = Server::new(on(false));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let f = Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
    };
    let left = f
        .ok(f.get(&format!("/workflows/hang/runs/{run_id}")).await)
        .await;
    assert_eq!(left["status"], "running");
    let done = f
        .ok(f
            .post(
                &format!("/workflows/hang/restart-async?runId={run_id}"),
                json!({}),
            )
            .await)
        .await;
    assert_eq!(done["status"], "success");
    assert_eq!(done["result"], json!({"v": 20}));
    let again = f
        .post(
            &format!("/workflows/hang/restart?runId={run_id}"),
            json!({}),
        )
        .await;
    error_of(again, 409, "not_active").await;
    error_of(
        f.post("/workflows/hang/restart", json!({})).await,
        400,
        "invalid_query",
    )
    .await;
    let all = f
        .ok(f
            .post(
                "/workflows/hang/restart-all-active-workflow-runs",
                json!({}),
            )
            .await)
        .await;
    assert_eq!(all["runIds"], json!([]));
    // A suspended run is resumed, not restarted.
    let gate = f.suspended_gate(1).await;
    let suspended = f
        .post(
            &format!("/workflows/gate/restart-async?runId={gate}"),
            json!({}),
        )
        .await;
    error_of(suspended, 409, "not_active").await;
}

#[tokio::test]
async fn a_nested_step_streams_with_its_path_and_is_resumed_by_it() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("wrapped").await;
    let events = f
        .stream(
            &format!("/workflows/wrapped/stream?runId={run_id}"),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-suspended")
        .map(|e| e["payload"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["checks.check", "checks"]);
    let info = f.ok(f.get("/workflows/wrapped").await).await;
    assert_eq!(
        info["stepGraph"][1]["step"]["serializedStepFlow"][0]["step"]["id"], "check",
        "the nested workflow's graph is drawn inside its step"
    );
    assert!(
        info["allSteps"]["checks.check"]["resumeSchema"].is_string(),
        "allSteps has the nested steps: {}",
        info["allSteps"]
    );
    let run = f
        .ok(f.get(&format!("/workflows/wrapped/runs/{run_id}")).await)
        .await;
    assert_eq!(
        run["steps"]["checks"]["suspendPayload"]["__workflow_meta"]["path"],
        json!(["check"])
    );
    let resume = format!("/workflows/wrapped/resume-stream?runId={run_id}");
    let refused = f
        .post(
            &resume,
            json!({"step": ["checks", "check"], "resumeData": {"approved": 1}}),
        )
        .await;
    error_of(refused, 422, "invalid_resume_data").await;
    let rest = f
        .stream(
            &resume,
            json!({"step": ["checks", "check"], "resumeData": {"approved": true}}),
        )
        .await;
    let finish = rest.last().unwrap();
    assert_eq!(finish["payload"]["workflowStatus"], "success");
    assert_eq!(
        finish["payload"]["finalWorkflowResult"],
        json!({"v": 101, "sure": true})
    );
}

#[tokio::test]
async fn a_foreach_item_is_resumed_by_its_index() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("batch").await;
    let start = format!("/workflows/batch/start-async?runId={run_id}");
    let stopped = f
        .ok(f.post(&start, json!({"inputData": [1, 2, 3]})).await)
        .await;
    assert_eq!(stopped["status"], "suspended");
    let resume = format!("/workflows/batch/resume-async?runId={run_id}");
    let unnamed = f
        .post(&resume, json!({"resumeData": {"approved": true}}))
        .await;
    error_of(unnamed, 409, "not_suspended_item").await;
    let ended = f
        .post(
            &resume,
            json!({"forEachIndex": 1, "resumeData": {"approved": true}}),
        )
        .await;
    error_of(ended, 409, "not_suspended_item").await;
    let first = f
        .ok(f
            .post(
                &resume,
                json!({"forEachIndex": 2.0, "resumeData": {"approved": true}}),
            )
            .await)
        .await;
    assert_eq!(first["status"], "suspended");
    assert_eq!(first["steps"]["item"]["output"], json!([null, 2, 30]));
    let done = f
        .ok(f
            .post(
                &resume,
                json!({"step": "item", "forEachIndex": 0, "resumeData": {"approved": false}}),
            )
            .await)
        .await;
    assert_eq!(done["status"], "success");
    assert_eq!(done["result"], json!([0, 2, 30]));
}

#[tokio::test]
async fn a_run_travels_back_to_a_step_over_http() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("numbers").await;
    let start = format!("/workflows/numbers/start-async?runId={run_id}");
    assert_eq!(
        f.ok(f.post(&start, json!({"inputData": {"v": 1}})).await)
            .await["result"],
        json!({"v": 10})
    );
    let travel = format!("/workflows/numbers/time-travel-async?runId={run_id}");
    let again = f
        .ok(f
            .post(
                &travel,
                json!({"step": "sum", "inputData": {"a": {"v": 1}, "b": {"v": 2}}}),
            )
            .await)
        .await;
    assert_eq!(again["status"], "success");
    assert_eq!(again["result"], json!({"v": 3}));
    assert_eq!(again["steps"]["s1"]["output"], json!({"v": 2}), "kept");
    let events = f
        .stream(
            &format!("/workflows/numbers/time-travel-stream?runId={run_id}"),
            json!({"step": ["a"]}),
        )
        .await;
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-start")
        .map(|e| e["payload"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        started,
        ["a", "b", "sum"],
        "the parallel entry runs again, then what follows"
    );
    let unknown = f.post(&travel, json!({"step": "nope"})).await;
    error_of(unknown, 404, "not_found").await;
    let unsupported = f.post(&travel, json!({"step": "sum", "context": {}})).await;
    error_of(unsupported, 422, "invalid_body").await;
    let bad_input = f
        .post(&travel, json!({"step": "sum", "inputData": {"a": 1}}))
        .await;
    error_of(bad_input, 422, "invalid_input").await;
    let pending = f.create_run("numbers").await;
    let refused = f
        .post(
            &format!("/workflows/numbers/time-travel-async?runId={pending}"),
            json!({"step": "s1", "inputData": {"v": 1}}),
        )
        .await;
    error_of(refused, 409, "travel_refused").await;
}
