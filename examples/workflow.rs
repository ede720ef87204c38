//! A workflow: typed steps in sequence, in parallel and in a branch, a step that suspends for
//! a person, and a resume after a "restart", on SQLite.
//!
//! `cargo run -p kestrel --features sqlite --example workflow`
//!
//! `draft` writes a summary of an order; `price` and `stock` run at once on it; the branch
//! sends big orders to `review` (which suspends until a person answers) and small ones to
//! `auto_approve`; `confirm` ends it. The run stops at `review` with its question saved in the
//! SQLite file; the instance goes away; a new one on the same file resumes the run with the
//! answer, and only `review` and `confirm` run again.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::kestrel::Kestrel;
use kestrel::storage::{SqliteStorage, Storage};
use kestrel::workflow::{Workflow, WorkflowStatus, create_step, when};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Order {
    item: String,
    quantity: u32,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Price {
    total: f64,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Stock {
    available: bool,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Checked {
    price: Price,
    stock: Stock,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Decision {
    approved: bool,
    by: String,
}

fn order_workflow() -> Result<Workflow, Box<dyn std::error::Error>> {
    let draft = create_step("draft")
        .description("Checks the order and keeps it in the workflow state")
        .execute(|order: Order, ctx| async move {
            ctx.set_state(json!({"item": order.item}));
            Ok(order)
        });
    let price = create_step("price").execute(|order: Order, _ctx| async move {
        Ok(Price {
            total: f64::from(order.quantity) * 12.5,
        })
    });
    let stock = create_step("stock").execute(|order: Order, _ctx| async move {
        Ok(Stock {
            available: order.quantity <= 100,
        })
    });
    let review = create_step("review")
        .description("Asks a person to approve a big order")
        .resume_type::<Decision>()
        .execute(|checked: Checked, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({
                    "question": format!("Approve an order of {:.2}?", checked.price.total)
                }))),
                Some(answer) => Ok(serde_json::from_value::<Decision>(answer.clone())?),
            }
        });
    let auto_approve = create_step("auto_approve").execute(|_checked: Checked, _ctx| async move {
        Ok(Decision {
            approved: true,
            by: "policy".into(),
        })
    });
    let confirm = create_step("confirm").execute(|decided: serde_json::Value, ctx| async move {
        let decision = decided
            .get("review")
            .or_else(|| decided.get("auto_approve"))
            .cloned()
            .unwrap_or_default();
        Ok(json!({"item": ctx.state()["item"], "decision": decision}))
    });
    let big = |c: kestrel::workflow::ConditionContext| async move {
        Ok(c.input["price"]["total"].as_f64().unwrap_or(0.0) > 1000.0)
    };
    Ok(Workflow::builder("order")
        .description("Prices an order and has big ones approved")
        .then(draft)
        .parallel([price, stock])
        .branch([
            (when(big), review),
            (
                when(move |c| async move { Ok(!big(c).await?) }),
                auto_approve,
            ),
        ])
        .then(confirm)
        .commit()?)
}

/// One "process": an instance on `store`, where its workflows keep their runs.
fn instance(store: Arc<dyn Storage>) -> Result<Kestrel, Box<dyn std::error::Error>> {
    Ok(Kestrel::builder()
        .storage(store)
        .workflow(order_workflow()?)
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("workflow.db");

    let run_id = {
        let store: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await?);
        let kestrel = instance(store)?;
        let run = kestrel.workflow("order")?.create_run();
        let mut stream = run
            .stream(json!({"item": "kestrel feeders", "quantity": 90}))
            .await?;
        while let Some(event) = stream.next().await {
            let payload = serde_json::to_value(&event)?["payload"].clone();
            println!(
                "{:<24} {}",
                event.type_name(),
                payload["id"].as_str().unwrap_or("")
            );
        }
        let result = stream.result().await?;
        assert_eq!(result.status, WorkflowStatus::Suspended);
        println!("waiting: {}", result.suspend_payload["review"]["question"]);
        run.run_id().to_owned()
    };

    // A new instance on the same file: the run is resumed from its snapshot.
    let store: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await?);
    let kestrel = instance(store)?;
    let result = kestrel
        .workflow("order")?
        .create_run_with_id(&run_id)
        .resume(Some("review"), json!({"approved": true, "by": "ana"}))
        .await?;
    assert_eq!(result.status, WorkflowStatus::Success);
    let output = result.result.unwrap_or_default();
    assert_eq!(output["decision"]["by"], "ana");
    println!("done: {output}");
    Ok(())
}
