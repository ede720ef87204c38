//! Completion checks: custom scorers whose feedback reaches the router, the rubric scorer,
//! the `any` strategy, the timeout and suppressed feedback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

pub(super) async fn scorers_decide_and_their_feedback_reaches_the_router(store: Store) {
    let router = scripted(vec![
        route("shout", "tool", r#"{"text": "hi"}"#, "shout it"),
        route(
            "shout",
            "tool",
            r#"{"text": "hi there"}"#,
            "shout it longer",
        ),
    ]);
    let kestrel = instance(
        &store,
        router.clone(),
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    );
    let agent = kestrel.agent("router").unwrap();
    let long_enough = ScorerFn::new("long-enough", |task| async move {
        let passed = task.answer.len() > 5;
        Ok(Score {
            scorer: String::new(),
            passed,
            score: if passed { 1.0 } else { 0.0 },
            reason: Some(
                if passed {
                    "long enough"
                } else {
                    "too short: say more"
                }
                .to_owned(),
            ),
        })
    });
    let (events, result) = agent
        .network("Shout a greeting")
        .memory(THREAD, RESOURCE)
        .max_steps(3)
        .completion(NetworkCompletion::new().scorer(long_enough))
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    assert_eq!(result.result, "HI THERE");
    assert_eq!(result.iteration, 1);
    let json: Vec<Value> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::NetworkValidationEnd(_)))
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(json[0]["payload"]["passed"], false);
    assert_eq!(
        json[0]["payload"]["results"][0]["scorerName"],
        "long-enough"
    );
    assert_eq!(json[1]["payload"]["passed"], true);
    // The first check's feedback was in the second routing call's conversation.
    let seen: String = router.requests()[1]
        .messages
        .iter()
        .map(|m| m.text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(seen.contains("too short: say more"), "{seen}");
}

pub(super) async fn the_rubric_scorer_any_strategy_timeout_and_suppressed_feedback(store: Store) {
    use kestrel_core::definition::iteration::{CompletionStrategy, RubricScorer};
    let router = scripted(vec![route(
        "shout",
        "tool",
        r#"{"text": "hi"}"#,
        "shout it",
    )]);
    let kestrel = instance(
        &store,
        router,
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    );
    let agent = kestrel.agent("router").unwrap();
    // The rubric judge passes the answer; a slow scorer runs out of time; `any` completes.
    let judge = scripted(vec![ScriptedResponse::text(
        json!({"passed": true, "score": 1.0, "reason": "it is loud"}).to_string(),
    )]);
    let rubric = RubricScorer::new(judge, ["The answer is in capitals"]);
    let slow = ScorerFn::new("slow", |_task| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(Score {
            scorer: String::new(),
            passed: true,
            score: 1.0,
            reason: None,
        })
    });
    let completion = NetworkCompletion::new()
        .scorer(rubric)
        .scorer(slow)
        .strategy(CompletionStrategy::Any)
        .timeout(Duration::from_millis(200))
        .suppress_feedback(true);
    let (events, result) = agent
        .network("Shout hi")
        .memory(THREAD, RESOURCE)
        .completion(completion)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    let json = wire(&events);
    let check = payload_of(&json, "network-validation-end");
    assert_eq!(check["timedOut"], true);
    assert_eq!(check["suppressFeedback"], true);
    assert_eq!(check["results"][0]["scorerName"], "rubric");
    assert_eq!(check["results"][0]["passed"], true);
    assert_eq!(check["results"][1]["passed"], false);
    assert!(
        check["results"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("did not finish before the completion timeout")
    );
    assert_eq!(
        payload_of(&json, "network-validation-start")["checksCount"],
        2
    );
    // No default check ran (no routing-agent-text-*), and no feedback reached the thread.
    assert!(!types(&events).contains(&"routing-agent-text-start"));
    let thread = thread_texts(&store).await;
    assert!(
        thread
            .iter()
            .all(|(_, text)| !text.starts_with("#### Completion Check Results")),
        "{thread:#?}"
    );
}
