//! Datasets and experiments over HTTP: a dataset created, its items changed in versions that
//! read back as they were, experiments of two agents run in the background over one version,
//! read back item by item and compared; bad asks refused with what is wrong; pinned tokens
//! refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::eval::{ScoreSampling, create_scorer};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_server::Server;
use serde_json::{Value, json};

fn kestrel() -> Kestrel {
    // 1 when the answer is the ground truth: the live scorer of `good` (sampling none of its
    // live runs) that experiments pick by id.
    let exact = create_scorer("exact-answer")
        .description("1 when the answer is the ground truth")
        .generate_score(|cx| async move {
            let truth = cx.run.ground_truth.clone().unwrap_or_default();
            Ok(if truth.as_str() == Some(cx.run.output_text().trim()) {
                1.0
            } else {
                0.0
            })
        })
        .build()
        .unwrap();
    // `good` answers with the capital the question names; `bad` always says Paris.
    let good = Agent::builder("good")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let asked = req.messages.last().map(|m| m.text()).unwrap_or_default();
            let city = if asked.contains("Germany") {
                "Berlin"
            } else {
                "Paris"
            };
            ScriptedResponse::text(city)
        })))
        .scorer(exact, ScoreSampling::ratio(0.0))
        .build()
        .unwrap();
    let bad = Agent::builder("bad")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Paris")
        })))
        .build()
        .unwrap();
    // `capital` looks the country of its input up; its live scorer compares the result with
    // the ground truth, JSON to JSON.
    let same = create_scorer("same-result")
        .generate_score(|cx| async move {
            let output = serde_json::to_value(&cx.run.output).unwrap_or_default();
            Ok(if cx.run.ground_truth.as_ref() == Some(&output) {
                1.0
            } else {
                0.0
            })
        })
        .build()
        .unwrap();
    let capital = kestrel_core::workflow::Workflow::builder("capital")
        .map(|input, _ctx| async move {
            let city = match input["country"].as_str() {
                Some("Germany") => "Berlin",
                Some("France") => "Paris",
                _ => return Err(kestrel_core::workflow::StepError::new("unknown country")),
            };
            Ok(json!({"capital": city}))
        })
        .scorer(same, ScoreSampling::ratio(0.0))
        .commit()
        .unwrap();
    Kestrel::builder()
        .agent(good)
        .agent(bad)
        .workflow(capital)
        .build()
        .unwrap()
}

async fn serve(server: Server) -> String {
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}/api")
}

async fn call(method: &str, url: String, body: Option<Value>) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut request = match method {
        "GET" => http.get(url),
        "DELETE" => http.delete(url),
        _ => http.post(url),
    };
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The experiment once it ended.
async fn finished(base: &str, id: &str) -> Value {
    for _ in 0..200 {
        let (status, body) = call("GET", format!("{base}/experiments/{id}"), None).await;
        assert_eq!(status, 200, "{body}");
        if body["experiment"]["status"] == "completed" || body["experiment"]["status"] == "failed" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("experiment {id} did not finish");
}

#[tokio::test]
async fn datasets_version_their_items_and_experiments_compare() {
    let base = serve(Server::new(kestrel())).await;
    let (status, dataset) = call(
        "POST",
        format!("{base}/datasets"),
        Some(json!({"id": "capitals", "name": "Capitals", "description": "Two questions"})),
    )
    .await;
    assert_eq!(status, 200, "{dataset}");
    assert_eq!(dataset["version"], 0);
    let (status, again) = call(
        "POST",
        format!("{base}/datasets"),
        Some(json!({"id": "capitals", "name": "Again"})),
    )
    .await;
    assert_eq!(status, 409, "{again}");

    let (status, v1) = call(
        "POST",
        format!("{base}/datasets/capitals/items"),
        Some(json!({"items": [
            {"id": "fr", "input": "What is the capital of France?", "groundTruth": "Paris"},
            {"id": "de", "input": "What is the capital of Germany?", "groundTruth": "Berlin"},
            {"id": "es", "input": "What is the capital of Spain?", "groundTruth": "Madrid"}
        ]})),
    )
    .await;
    assert_eq!(status, 200, "{v1}");
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["items"].as_array().unwrap().len(), 3);
    let (status, v2) = call("DELETE", format!("{base}/datasets/capitals/items/es"), None).await;
    assert_eq!((status, &v2["version"]), (200, &json!(2)), "{v2}");
    let (_, now) = call("GET", format!("{base}/datasets/capitals/items"), None).await;
    let ids: Vec<&str> = now["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!((ids, &now["version"]), (vec!["de", "fr"], &json!(2)));
    let (_, then) = call(
        "GET",
        format!("{base}/datasets/capitals/items?version=1"),
        None,
    )
    .await;
    assert_eq!(
        then["items"].as_array().unwrap().len(),
        3,
        "version 1 kept Spain"
    );

    // Two agents over version 2, scored by a code scorer.
    let mut ids = Vec::new();
    for agent in ["good", "bad"] {
        let (status, started) = call(
            "POST",
            format!("{base}/datasets/capitals/experiments"),
            Some(json!({"targetType": "agent", "targetId": agent, "scorerIds": ["exact-answer", "content-similarity"], "maxConcurrency": 2})),
        )
        .await;
        assert_eq!(status, 200, "{started}");
        assert_eq!(started["status"], "pending");
        assert_eq!(started["totalItems"], 2);
        ids.push(started["id"].as_str().unwrap().to_owned());
    }
    let good = finished(&base, &ids[0]).await;
    assert_eq!(good["experiment"]["status"], "completed", "{good}");
    assert_eq!(good["experiment"]["succeededCount"], 2);
    assert_eq!(good["experiment"]["datasetVersion"], 2);
    let results = good["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["itemId"], "de");
    assert_eq!(results[0]["output"], "Berlin");
    assert!(results[0]["runId"].is_string());
    assert_eq!(good["summary"]["content-similarity-scorer"]["scored"], 2);
    assert_eq!(good["summary"]["exact-answer"]["mean"], 1.0);
    finished(&base, &ids[1]).await;

    let (status, listed) = call(
        "GET",
        format!("{base}/experiments?datasetId=capitals"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(listed["pagination"]["total"], 2);

    let (status, compared) = call(
        "POST",
        format!("{base}/datasets/capitals/compare"),
        Some(json!({"experimentIdA": ids[1], "experimentIdB": ids[0]})),
    )
    .await;
    assert_eq!(status, 200, "{compared}");
    let scorer = &compared["scorers"][1];
    assert_eq!(scorer["scorerId"], "exact-answer");
    assert_eq!(
        (&scorer["baseline"], &scorer["candidate"], &scorer["delta"]),
        (&json!(0.5), &json!(1.0), &json!(0.5)),
        "the good agent scores better: {compared}"
    );
    let de = compared["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["itemId"] == "de")
        .unwrap();
    assert_eq!(de["baselineOutput"], "Paris");
    assert_eq!(de["candidateOutput"], "Berlin");

    // Deleting the dataset deletes its experiments.
    let (status, _) = call("DELETE", format!("{base}/datasets/capitals"), None).await;
    assert_eq!(status, 200);
    let (status, _) = call("GET", format!("{base}/experiments/{}", ids[0]), None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_workflow_runs_as_an_experiment_target_on_json_inputs() {
    let kestrel = kestrel();
    let base = serve(Server::new(kestrel.clone())).await;
    call(
        "POST",
        format!("{base}/datasets"),
        Some(json!({"id": "countries", "name": "Countries"})),
    )
    .await;
    let (status, items) = call(
        "POST",
        format!("{base}/datasets/countries/items"),
        Some(json!({"items": [
            {"id": "de", "input": {"country": "Germany"}, "groundTruth": {"capital": "Berlin"}, "context": ["Berlin is Germany's capital."]},
            {"id": "fr", "input": {"country": "France"}, "groundTruth": {"capital": "Lyon"}},
            {"id": "xx", "input": {"country": "Atlantis"}}
        ]})),
    )
    .await;
    assert_eq!(status, 200, "{items}");
    let (_, listed) = call("GET", format!("{base}/datasets/countries/items"), None).await;
    let de = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "de")
        .unwrap();
    assert_eq!(
        de["context"],
        json!(["Berlin is Germany's capital."]),
        "{listed}"
    );
    let (status, started) = call(
        "POST",
        format!("{base}/datasets/countries/experiments"),
        Some(
            // Whole numbers as JSON Schema's `integer` allows them (`1.0`).
            json!({"targetType": "workflow", "targetId": "capital", "scorerIds": ["same-result"], "version": 1.0, "retries": 0.0}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(
        (&started["targetType"], &started["targetId"]),
        (&json!("workflow"), &json!("capital"))
    );
    let id = started["id"].as_str().unwrap();
    let done = finished(&base, id).await;
    assert_eq!(done["experiment"]["status"], "completed", "{done}");
    assert_eq!(
        (
            &done["experiment"]["succeededCount"],
            &done["experiment"]["failedCount"]
        ),
        (&json!(2), &json!(1)),
        "{done}"
    );
    let results = done["results"].as_array().unwrap();
    let de = results.iter().find(|r| r["itemId"] == "de").unwrap();
    assert_eq!(de["input"], json!({"country": "Germany"}));
    assert_eq!(de["output"], json!({"capital": "Berlin"}));
    assert!(de["runId"].is_string());
    let xx = results.iter().find(|r| r["itemId"] == "xx").unwrap();
    assert_eq!(xx["status"], "failed");
    assert!(
        xx["error"].as_str().unwrap().contains("unknown country"),
        "{xx}"
    );
    assert_eq!(done["summary"]["same-result"]["mean"], 0.5, "{done}");
    // The scores are the workflow's, kept as test scores of the experiment.
    let (status, scores) = call(
        "GET",
        format!("{base}/scores/entity/WORKFLOW/capital"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{scores}");
    assert_eq!(scores["pagination"]["total"], 2, "{scores}");
    assert_eq!(scores["scores"][0]["experimentId"], id);
}

#[tokio::test]
async fn bad_asks_name_what_is_wrong() {
    let base = serve(Server::new(kestrel())).await;
    call(
        "POST",
        format!("{base}/datasets"),
        Some(json!({"id": "d", "name": "d"})),
    )
    .await;
    let long = "x".repeat(600);
    for (method, path, body, status, needle) in [
        (
            "POST",
            "/datasets".to_owned(),
            json!({"name": ""}),
            422,
            "name",
        ),
        (
            "POST",
            "/datasets".to_owned(),
            json!({"id": long, "name": "x"}),
            422,
            "id",
        ),
        ("GET", "/datasets/nope".to_owned(), Value::Null, 404, "nope"),
        (
            "POST",
            "/datasets/d/items".to_owned(),
            json!({"items": []}),
            422,
            "items",
        ),
        (
            "POST",
            "/datasets/d/items".to_owned(),
            json!({"items": [{"input": null}]}),
            422,
            "input",
        ),
        (
            "POST",
            "/datasets/nope/items".to_owned(),
            json!({"items": [{"input": "q"}]}),
            404,
            "nope",
        ),
        (
            "DELETE",
            "/datasets/d/items/missing".to_owned(),
            Value::Null,
            404,
            "missing",
        ),
        (
            "GET",
            "/datasets/d/items?version=9".to_owned(),
            Value::Null,
            404,
            "no version 9",
        ),
        (
            "POST",
            "/datasets/d/experiments".to_owned(),
            json!({"targetType": "agent", "targetId": "good", "scorerIds": ["content-similarity"]}),
            409,
            "no items",
        ),
        (
            "POST",
            "/datasets/d/experiments".to_owned(),
            json!({"targetType": "agent", "targetId": "good", "scorerIds": ["tone"], "version": 3}),
            404,
            "no version 3",
        ),
        (
            "POST",
            "/datasets/d/items".to_owned(),
            json!({"items": [{"id": "x", "input": "a"}, {"id": "x", "input": "b"}]}),
            409,
            "twice",
        ),
        (
            "POST",
            "/datasets/d/experiments".to_owned(),
            json!({"targetType": "workflow", "targetId": "good", "scorerIds": ["tone"]}),
            404,
            "workflow",
        ),
        (
            "POST",
            "/datasets/d/experiments".to_owned(),
            json!({"targetType": "agent", "targetId": "ghost", "scorerIds": ["tone"]}),
            404,
            "ghost",
        ),
        (
            "POST",
            "/datasets/d/experiments".to_owned(),
            json!({"targetType": "agent", "targetId": "good", "scorerIds": ["vibes"]}),
            404,
            "vibes",
        ),
        (
            "POST",
            "/datasets/d/compare".to_owned(),
            json!({"experimentIdA": "x", "experimentIdB": "y"}),
            404,
            "x",
        ),
        (
            "GET",
            "/experiments?perPage=0".to_owned(),
            Value::Null,
            400,
            "perPage",
        ),
    ] {
        let body = (!body.is_null()).then_some(body);
        let (got, error) = call(method, format!("{base}{path}"), body).await;
        assert_eq!(got, status, "{method} {path}: {error}");
        assert!(
            error.to_string().contains(needle),
            "{method} {path}: {error}"
        );
    }
}

#[tokio::test]
async fn a_pinned_token_is_refused() {
    let base = serve(Server::new(kestrel()).resource_token("ada-token", "ada")).await;
    let response = reqwest::Client::new()
        .get(format!("{base}/datasets"))
        .bearer_auth("ada-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
}
