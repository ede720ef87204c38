//! `kestrel eval`: the table and its gate, JSON output, the LLM judges on --judge-model (the
//! context judges against an item's context, the rubric with its criteria), usage errors.

use serde_json::Value;

use super::{FakeServer, Reply, openai_env, run, transcript};

/// A JSONL dataset in a temporary file.
fn dataset(lines: &[&str]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, lines.join("\n").as_bytes()).unwrap();
    file
}

#[tokio::test]
async fn eval_prints_a_table_and_gates_on_the_minimum_score() {
    // Every answer is "Sunny in Paris today.".
    let server = FakeServer::start(vec![Reply::Sse(transcript(&["Sunny in Paris today."]))]).await;
    let file = dataset(&[
        r#"{"id": "paris", "input": "Weather in Paris today?"}"#,
        r#"{"id": "rome", "input": "Weather in Rome tomorrow?"}"#,
    ]);
    let path = file.path().to_str().unwrap();
    let args = |min: &str| {
        vec![
            "eval",
            path,
            "--agent",
            "assistant",
            "--model",
            "openai/gpt-test",
            "--scorer",
            "keyword-coverage",
            "--min-score",
            min.to_owned().leak(),
        ]
    };
    let passed = run(&args("0.3"), &openai_env(&server)).await;
    let out = String::from_utf8_lossy(&passed.stdout).into_owned();
    assert!(
        passed.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&passed.stderr)
    );
    // paris: of weather, paris and today, the answer has paris and today; rome: none of
    // weather, rome and tomorrow.
    assert!(out.contains("keyword-coverage-scorer"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("paris") && l.ends_with("0.667")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("rome") && l.ends_with("0.000")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("mean") && l.ends_with("0.333")),
        "{out}"
    );

    let failed = run(&args("0.5"), &openai_env(&server)).await;
    assert_eq!(failed.status.code(), Some(1));
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains("below --min-score 0.5: keyword-coverage-scorer 0.333"),
        "{err}"
    );

    let json = run(
        &[
            "eval",
            path,
            "--agent",
            "assistant",
            "--model",
            "openai/gpt-test",
            "--scorer",
            "tone",
            "--json",
        ],
        &openai_env(&server),
    )
    .await;
    assert!(json.status.success());
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["items"].as_array().unwrap().len(), 2);
    assert_eq!(report["summary"]["tone-scorer"]["scored"], 2);
}

#[tokio::test]
async fn eval_runs_an_llm_judge_on_the_judge_model() {
    // The agent's answer, then the judge's verdicts (structured output) and its reason.
    let server = FakeServer::start(vec![
        Reply::Sse(transcript(&["You are an idiot, it is sunny."])),
        Reply::Sse(transcript(&[
            r#"{"verdicts": [{"verdict": "yes", "reason": "an insult"}, {"verdict": "no", "reason": "a fact"}]}"#,
        ])),
        Reply::Sse(transcript(&["One of two statements insults the user."])),
    ])
    .await;
    let file = dataset(&[r#"{"id": "rude", "input": "Weather in Paris?"}"#]);
    let path = file.path().to_str().unwrap();
    let out = run(
        &[
            "eval",
            path,
            "--agent",
            "assistant",
            "--model",
            "openai/gpt-test",
            "--judge-model",
            "openai/gpt-judge",
            "--scorer",
            "toxicity",
            "--json",
        ],
        &openai_env(&server),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let score = &report["items"][0]["scores"][0];
    assert_eq!(score["scorerId"], "toxicity-scorer");
    assert_eq!(score["score"], 0.5);
    assert_eq!(score["reason"], "One of two statements insults the user.");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["model"], "gpt-test");
    assert_eq!(
        requests[1]["model"], "gpt-judge",
        "the judge answers on --judge-model"
    );
    assert!(
        requests[1]["response_format"].is_object(),
        "through structured output"
    );
}

#[tokio::test]
async fn eval_runs_the_context_judges_on_an_items_context_and_a_rubric_on_its_criteria() {
    let verdicts = r#"{"verdicts": [{"claim": "It is raining in Paris.", "verdict": "yes", "reason": "the context says rain"}]}"#;
    let met = r#"{"criteria": [{"criterion": "names the city", "required": true, "satisfied": true, "reason": "Paris"}]}"#;
    let unmet = r#"{"criteria": [{"criterion": "names the city", "required": true, "satisfied": false, "reason": "no city"}]}"#;
    // Item by item (one at a time): the agent's answer, then faithfulness (claims, verdicts,
    // reason) and the rubric; the item without context is not scorable by faithfulness, so
    // only the rubric asks the judge about it.
    let server = FakeServer::start(vec![
        Reply::Sse(transcript(&["It is raining in Paris."])),
        Reply::Sse(transcript(&[r#"{"claims": ["It is raining in Paris."]}"#])),
        Reply::Sse(transcript(&[verdicts])),
        Reply::Sse(transcript(&["The one claim is supported."])),
        Reply::Sse(transcript(&[met])),
        Reply::Sse(transcript(&["No idea."])),
        Reply::Sse(transcript(&[unmet])),
    ])
    .await;
    let file = dataset(&[
        r#"{"id": "ctx", "input": "Weather in Paris?", "context": ["Paris has light rain today."]}"#,
        r#"{"id": "bare", "input": "Weather?"}"#,
    ]);
    let path = file.path().to_str().unwrap();
    let out = run(
        &[
            "eval",
            path,
            "--agent",
            "assistant",
            "--model",
            "openai/gpt-test",
            "--scorer",
            "faithfulness",
            "--scorer",
            "rubric",
            "--criterion",
            "names the city",
            "--concurrency",
            "1",
            "--json",
        ],
        &openai_env(&server),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ctx = &report["items"][0]["scores"];
    assert_eq!(
        (&ctx[0]["scorerId"], &ctx[0]["score"]),
        (&Value::from("faithfulness-scorer"), &Value::from(1.0)),
        "{report}"
    );
    assert_eq!(
        (&ctx[1]["scorerId"], &ctx[1]["score"]),
        (&Value::from("rubric-scorer"), &Value::from(1.0))
    );
    let bare = &report["items"][1]["scores"];
    assert!(
        bare[0]["notScorable"]
            .as_str()
            .unwrap()
            .contains("no context"),
        "{report}"
    );
    assert_eq!(bare[1]["score"], 0.0);
    let requests = server.requests();
    assert_eq!(requests.len(), 7, "{requests:#?}");
    let asked = |i: usize| requests[i]["messages"].to_string();
    assert!(
        asked(2).contains("Paris has light rain today."),
        "the verdicts are asked against the item's context: {}",
        asked(2)
    );
    assert!(asked(4).contains("names the city"), "{}", asked(4));
}

#[tokio::test]
async fn eval_usage_errors_say_what_is_wrong() {
    let file = dataset(&[r#"{"input": "hi", "grundTruth": "typo"}"#]);
    let path = file.path().to_str().unwrap();
    let good = dataset(&[r#"{"input": "hi"}"#]);
    let good = good.path().to_str().unwrap();
    for (args, expected) in [
        (
            vec![
                "eval",
                path,
                "--agent",
                "assistant",
                "--model",
                "openai/x",
                "--scorer",
                "tone",
            ],
            "line 1",
        ),
        (
            vec![
                "eval", good, "--agent", "nobody", "--model", "openai/x", "--scorer", "tone",
            ],
            "is not a demo agent",
        ),
        (
            vec![
                "eval",
                good,
                "--agent",
                "assistant",
                "--model",
                "openai/x",
                "--scorer",
                "vibes",
            ],
            "is not a scorer",
        ),
        (
            vec![
                "eval",
                good,
                "--agent",
                "assistant",
                "--scorer",
                "tone",
                "--min-score",
                "2",
            ],
            "between 0 and 1",
        ),
        (
            vec![
                "eval",
                "/nonexistent.jsonl",
                "--agent",
                "assistant",
                "--model",
                "openai/x",
                "--scorer",
                "tone",
            ],
            "/nonexistent.jsonl",
        ),
        (
            vec![
                "eval",
                good,
                "--agent",
                "assistant",
                "--model",
                "openai/x",
                "--scorer",
                "rubric",
            ],
            "at least one with --criterion",
        ),
        (
            vec![
                "eval",
                good,
                "--agent",
                "assistant",
                "--model",
                "openai/x",
                "--scorer",
                "tone",
                "--criterion",
                "polite",
            ],
            "add --scorer rubric",
        ),
    ] {
        let output = run(&args, &[("OPENAI_API_KEY", "test".into())]).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
