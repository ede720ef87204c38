//! Bad requests, paging and filtering, and runs kept per resource.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::{error_of, serve};

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
