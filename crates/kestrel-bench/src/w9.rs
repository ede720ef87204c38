//! W9: the five-step workflow of Mastra's fixture (s1 → parallel(a, b) → branch(hi | lo) →
//! s3, numeric steps), run after run, with `start` (the result) and `stream` (every event
//! read), its runs kept in memory.

use futures::StreamExt;
use kestrel::workflow::{Workflow, create_step, when};
use serde_json::{Value, json};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct V {
    v: i64,
}

fn w9() -> Result<Workflow, Box<dyn std::error::Error>> {
    let s1 = create_step("s1").execute(|n: V, _ctx| async move { Ok(V { v: n.v * 2 }) });
    let a = create_step("a").execute(|n: V, _ctx| async move { Ok(json!({"x": n.v * 2})) });
    let b = create_step("b").execute(|n: V, _ctx| async move { Ok(json!({"y": n.v * 3})) });
    let sum = |input: &Value| {
        input["a"]["x"].as_i64().unwrap_or(0) + input["b"]["y"].as_i64().unwrap_or(0)
    };
    let hi = create_step("hi").execute(move |ab: Value, _ctx| async move { Ok(V { v: sum(&ab) }) });
    let lo =
        create_step("lo").execute(move |ab: Value, _ctx| async move { Ok(V { v: -sum(&ab) }) });
    let s3 = create_step("s3").execute(|h: Value, _ctx| async move {
        Ok(V {
            v: h["hi"]["v"].as_i64().unwrap_or(0) * 10,
        })
    });
    Ok(Workflow::builder("w9")
        .then(s1)
        .parallel([a, b])
        .branch([
            (when(move |c| async move { Ok(sum(&c.input) > 5) }), hi),
            (when(move |c| async move { Ok(sum(&c.input) <= 5) }), lo),
        ])
        .then(s3)
        .commit()?)
}

/// `start` and `stream`, `runs` runs per batch.
pub async fn w9_bench(runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let workflow = w9()?;
    super::per_run_batches("w9 start (5 steps, no storage)", runs, 11, || {
        let workflow = workflow.clone();
        async move {
            let result = workflow.create_run().start(json!({"v": 1})).await?;
            debug_assert_eq!(result.result, Some(json!({"v": 100})));
            Ok(())
        }
    })
    .await?;
    super::per_run_batches("w9 stream (5 steps, every event read)", runs, 11, || {
        let workflow = workflow.clone();
        async move {
            let mut stream = workflow.create_run().stream(json!({"v": 1})).await?;
            let mut events = 0;
            while stream.next().await.is_some() {
                events += 1;
            }
            debug_assert_eq!(events, 12);
            stream.result().await?;
            Ok(())
        }
    })
    .await
}
