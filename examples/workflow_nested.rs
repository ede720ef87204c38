//! A workflow inside another, a suspension deep inside it, and time travel.
//!
//! `cargo run -p kestrel --example workflow_nested`
//!
//! `onboarding` runs `account` (it makes an account id), then the nested workflow
//! `verification`, whose `id_check` suspends until a person confirms the document, then
//! `welcome`. The inner step's events reach the outer stream as `verification.id_check`; the
//! run stops at the path `["verification", "id_check"]`, is resumed at that path, and then
//! travels back to `welcome` with another name.

use futures::StreamExt;
use kestrel::event::EventKind;
use kestrel::workflow::{TimeTravel, Workflow, WorkflowStatus, create_step};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Person {
    name: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Confirmation {
    /// Does the document match the person?
    confirmed: bool,
}

fn onboarding() -> Result<Workflow, Box<dyn std::error::Error>> {
    let account = create_step("account").execute(|person: Person, _ctx| async move {
        Ok(json!({"name": person.name, "account": format!("acc-{}", person.name.len())}))
    });
    let id_check = create_step("id_check")
        .description("A person checks the identity document")
        .resume_type::<Confirmation>()
        .execute(|account: Value, ctx| async move {
            match ctx.resume_data() {
                None => {
                    Err(ctx.suspend(json!({"question": format!("Is this {}?", account["name"])})))
                }
                Some(answer) => {
                    let answer: Confirmation = serde_json::from_value(answer.clone())?;
                    Ok(json!({"name": account["name"], "verified": answer.confirmed}))
                }
            }
        });
    let verification = Workflow::builder("verification").then(id_check).commit()?;
    let welcome = create_step("welcome").execute(|checked: Value, _ctx| async move {
        let name = checked["name"].as_str().unwrap_or_default().to_owned();
        Ok(json!({"message": if checked["verified"] == true {
            format!("Welcome, {name}!")
        } else {
            format!("Sorry, {name}: we could not verify you.")
        }}))
    });
    Ok(Workflow::builder("onboarding")
        .input_type::<Person>()
        .then(account)
        .then(verification)
        .then(welcome)
        .commit()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workflow = onboarding()?;
    let run = workflow.create_run();
    let mut stream = run.stream(json!({"name": "Ada"})).await?;
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::WorkflowStepStart(step) => println!("start   {}", step.id),
            EventKind::WorkflowStepSuspended(step) => println!(
                "waits   {}: {}",
                step.id,
                step.suspend_payload.clone().unwrap_or_default()
            ),
            _ => {}
        }
    }
    let stopped = stream.result().await?;
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    println!("suspended at {:?}", stopped.suspended);

    let path: Vec<&str> = stopped.suspended[0].iter().map(String::as_str).collect();
    let done = run.resume_at(&path, json!({"confirmed": true})).await?;
    println!(
        "resumed: {}",
        done.result.clone().unwrap_or_default()["message"]
    );
    assert_eq!(done.status, WorkflowStatus::Success);

    // Back to `welcome`, with other input: `account` and the verification keep their results.
    let again = run
        .time_travel(TimeTravel::to("welcome").input(json!({"name": "Grace", "verified": false})))
        .await?;
    println!(
        "time travel: {}",
        again.result.unwrap_or_default()["message"]
    );
    Ok(())
}
