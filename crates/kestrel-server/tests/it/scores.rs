//! The score routes: live scorers listed with their agents, sampling and counts; a run's
//! live scores read by run, scorer and agent; a caller's score saved (and replaced by id);
//! bad bodies and ids refused; pinned tokens refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::eval::{ScoreSampling, create_scorer};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_server::Server;
use serde_json::{Value, json};

fn kestrel() -> Kestrel {
    let short = create_scorer("short-answer")
        .description("1 when the answer is under 40 characters")
        .generate_score(|cx| async move {
            Ok(if cx.run.output_text().len() < 40 {
                1.0
            } else {
                0.0
            })
        })
        .build()
        .unwrap();
    let agent = Agent::builder("weather")
        .name("Weather agent")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Clear skies.")
        })))
        .scorer(short, ScoreSampling::ratio(1.0))
        .build()
        .unwrap();
    // A workflow scoring its runs with a scorer of the same id: one view, both listed.
    let short_too = create_scorer("short-answer")
        .generate_score(|_| async move { Ok(1.0) })
        .build()
        .unwrap();
    let echo = kestrel_core::workflow::Workflow::builder("echo")
        .map(|input, _ctx| async move { Ok(input) })
        .scorer(short_too, ScoreSampling::None)
        .commit()
        .unwrap();
    Kestrel::builder()
        .agent(agent)
        .workflow(echo)
        .build()
        .unwrap()
}

async fn serve(server: Server) -> String {
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}/api")
}

async fn get(http: &reqwest::Client, url: String) -> (u16, Value) {
    let response = http.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn live_scores_are_listed_by_run_scorer_and_agent() {
    let kestrel = kestrel();
    let base = serve(Server::new(kestrel.clone())).await;
    let http = reqwest::Client::new();
    let answered: Value = http
        .post(format!("{base}/agents/weather/generate"))
        .json(&json!({"messages": [{"role": "user", "content": "Weather?"}], "runId": "run-7"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answered["text"], "Clear skies.", "{answered}");
    kestrel.scoring().idle().await;

    let (status, scorers) = get(&http, format!("{base}/scores/scorers")).await;
    assert_eq!(status, 200, "{scorers}");
    let scorer = &scorers["short-answer"];
    assert_eq!(scorer["agentIds"], json!(["weather"]));
    assert_eq!(scorer["workflowIds"], json!(["echo"]));
    assert_eq!(scorer["agentNames"], json!(["Weather agent"]));
    assert_eq!(scorer["sampling"], json!({"type": "ratio", "rate": 1.0}));
    assert_eq!(
        scorer["scorer"]["description"],
        "1 when the answer is under 40 characters"
    );
    assert_eq!(
        scorer["counts"],
        json!({"eligible": 1, "sampled": 1, "scored": 1, "failed": 0})
    );
    let (status, one) = get(&http, format!("{base}/scores/scorers/short-answer")).await;
    assert_eq!((status, &one["source"]), (200, &json!("code")));
    let (status, _) = get(&http, format!("{base}/scores/scorers/nope")).await;
    assert_eq!(status, 404);

    for path in [
        "scores/run/run-7",
        "scores/scorer/short-answer",
        "scores/entity/AGENT/weather",
    ] {
        let (status, page) = get(&http, format!("{base}/{path}")).await;
        assert_eq!(status, 200, "{path}: {page}");
        assert_eq!(page["pagination"]["total"], 1, "{path}: {page}");
        assert_eq!(page["pagination"]["hasMore"], false);
        let score = &page["scores"][0];
        assert_eq!(score["score"], 1.0);
        assert_eq!(score["runId"], "run-7");
        assert_eq!(score["source"], "LIVE");
        assert_eq!(score["output"][0]["parts"][0]["text"], "Clear skies.");
    }
    let (status, empty) = get(&http, format!("{base}/scores/run/other?page=0&perPage=5")).await;
    assert_eq!((status, &empty["pagination"]["total"]), (200, &json!(0)));
    let (status, _) = get(&http, format!("{base}/scores/run/run-7?perPage=0")).await;
    assert_eq!(status, 400, "perPage is at least 1");
    let (status, _) = get(&http, format!("{base}/scores/run/run-7?color=red")).await;
    assert_eq!(status, 400, "unknown query fields are refused");
    let long = "r".repeat(600);
    let (status, _) = get(&http, format!("{base}/scores/run/{long}")).await;
    assert_eq!(status, 400, "ids are bounded");
}

#[tokio::test]
async fn a_callers_score_is_saved_and_replaced_by_id() {
    let kestrel = kestrel();
    let base = serve(Server::new(kestrel.clone())).await;
    let http = reqwest::Client::new();
    let body = json!({"score": {
        "id": "mine-1", "scorerId": "human-review", "runId": "run-1",
        "entityType": "AGENT", "entityId": "weather", "score": 0.25,
        "reason": "too vague", "metadata": {"reviewer": "ada"}
    }});
    let saved: Value = http
        .post(format!("{base}/scores"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(saved["score"]["source"], "TEST", "{saved}");
    assert_eq!(saved["score"]["reason"], "too vague");
    let mut again = body.clone();
    again["score"]["score"] = json!(0.75);
    let response = http
        .post(format!("{base}/scores"))
        .json(&again)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, page) = get(&http, format!("{base}/scores/scorer/human-review")).await;
    assert_eq!(page["pagination"]["total"], 1);
    assert_eq!(page["scores"][0]["score"], 0.75);
    assert_eq!(page["scores"][0]["metadata"]["reviewer"], "ada");

    for (bad, why) in [
        (
            json!({"score": {"scorerId": "x", "runId": "r", "entityType": "AGENT", "entityId": "a"}}),
            "no score",
        ),
        (
            json!({"score": {"scorerId": "", "runId": "r", "entityType": "AGENT", "entityId": "a", "score": 1}}),
            "empty scorer id",
        ),
        (
            json!({"score": {"scorerId": "x", "runId": "r", "entityType": "AGENT", "entityId": "a", "score": 1, "extra": 1}}),
            "unknown field",
        ),
        (
            json!({"score": {"scorerId": "x", "runId": "r\u{0}", "entityType": "AGENT", "entityId": "a", "score": 1}}),
            "NUL in an id",
        ),
    ] {
        let response = http
            .post(format!("{base}/scores"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{why}");
    }
}

#[tokio::test]
async fn a_pinned_token_is_refused() {
    let server = Server::new(kestrel()).resource_token("ada-token", "ada");
    let base = serve(server).await;
    let response = reqwest::Client::new()
        .get(format!("{base}/scores/scorers"))
        .bearer_auth("ada-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}
