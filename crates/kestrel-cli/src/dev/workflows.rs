//! The demo workflows of `kestrel dev`, on the embedded defaults:
//!
//! - **`weather-report`** (parallel arms and a branch): `forecast` the city's weather, then
//!   `temperature` and `sky` at once, then `warm` or `cool` (whichever holds), then `report`.
//! - **`publish-post`** (a person in the loop): `draft` a post on a topic, `review` suspends
//!   until a person approves or rejects it (a resume form in the Studio), then `publish`.
//! - **`research-brief`** (an agent step): the `research` agent writes notes on a topic, and
//!   `brief` frames them.
//!
//! Each plain step takes `step_delay` first (`--tool-delay-ms`), as real work would: long
//! enough, it lets one watch a run step by step, or kill the process between two steps and
//! see the next one continue the run.

use std::time::Duration;

use kestrel::agent::Agent;
use kestrel::workflow::{AgentStep, Workflow, WorkflowBuildError, create_step, when};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The id of the workflow with parallel arms and a branch.
pub const WEATHER_REPORT: &str = "weather-report";
/// The id of the workflow that suspends for a person.
pub const PUBLISH_POST: &str = "publish-post";
/// The id of the workflow with an agent step.
pub const RESEARCH_BRIEF: &str = "research-brief";

/// A city.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct City {
    /// The city's name.
    #[schemars(length(min = 1, max = 100))]
    city: String,
}

/// The weather of a city.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Forecast {
    city: String,
    sky: String,
    temperature_c: i64,
}

/// A topic.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Topic {
    /// What to write about.
    #[schemars(length(min = 1, max = 200))]
    topic: String,
}

/// A draft waiting for its review.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Draft {
    topic: String,
    text: String,
}

/// What the reviewer decides.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Review {
    /// Publish the post?
    approved: bool,
    /// A note for the author.
    #[serde(default)]
    note: Option<String>,
}

/// A reviewed draft.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Reviewed {
    text: String,
    approved: bool,
    #[serde(default)]
    note: Option<String>,
}

/// The three demo workflows; `research` is the agent of `research-brief`.
pub(super) fn demo_workflows(
    research: Agent,
    step_delay: Duration,
) -> Result<Vec<Workflow>, WorkflowBuildError> {
    Ok(vec![
        weather_report(step_delay)?,
        publish_post(step_delay)?,
        research_brief(research, step_delay)?,
    ])
}

fn weather_report(delay: Duration) -> Result<Workflow, WorkflowBuildError> {
    let forecast = create_step("forecast")
        .description("Gets the city's weather (demo data)")
        .execute(move |city: City, _ctx| async move {
            tokio::time::sleep(delay).await;
            let weather = super::demo_weather(&city.city);
            Ok(Forecast {
                city: city.city.trim().to_owned(),
                sky: weather["sky"].as_str().unwrap_or_default().to_owned(),
                temperature_c: weather["temperatureC"].as_i64().unwrap_or_default(),
            })
        });
    let temperature = create_step("temperature")
        .description("Reads the temperature")
        .execute(move |f: Forecast, _ctx| async move {
            tokio::time::sleep(delay).await;
            Ok(json!({"celsius": f.temperature_c}))
        });
    let sky = create_step("sky").description("Reads the sky").execute(
        move |f: Forecast, _ctx| async move {
            tokio::time::sleep(delay).await;
            Ok(json!({"sky": f.sky}))
        },
    );
    let warm = create_step("warm")
        .description("Advice for a warm day")
        .execute(|_: Value, _ctx| async { Ok(json!({"advice": "light clothes will do"})) });
    let cool = create_step("cool")
        .description("Advice for a cool day")
        .execute(|_: Value, _ctx| async { Ok(json!({"advice": "bring a jacket"})) });
    let report = create_step("report")
        .description("Writes the report")
        .execute(move |arms: Value, ctx| async move {
            tokio::time::sleep(delay).await;
            let forecast = ctx.step_result("forecast").unwrap_or_default();
            let advice = arms
                .as_object()
                .and_then(|arms| arms.values().next())
                .and_then(|arm| arm["advice"].as_str())
                .unwrap_or("enjoy the day")
                .to_owned();
            Ok(json!({
                "report": format!(
                    "{}: {}, {} °C; {advice}.",
                    forecast["city"].as_str().unwrap_or_default(),
                    forecast["sky"].as_str().unwrap_or_default(),
                    forecast["temperatureC"],
                ),
            }))
        });
    let celsius = |input: &Value| input["temperature"]["celsius"].as_i64().unwrap_or_default();
    Workflow::builder(WEATHER_REPORT)
        .description("A city's weather: two readings at once, then advice for a warm or a cool day")
        .input_type::<City>()
        .then(forecast)
        .parallel([temperature, sky])
        .branch([
            (
                when(move |c| async move { Ok(celsius(&c.input) >= 18) }),
                warm,
            ),
            (
                when(move |c| async move { Ok(celsius(&c.input) < 18) }),
                cool,
            ),
        ])
        .then(report)
        .commit()
}

fn publish_post(delay: Duration) -> Result<Workflow, WorkflowBuildError> {
    let draft = create_step("draft").description("Drafts the post").execute(
        move |topic: Topic, _ctx| async move {
            tokio::time::sleep(delay).await;
            Ok(Draft {
                text: format!("Notes on {}: what it is, and why it matters.", topic.topic),
                topic: topic.topic,
            })
        },
    );
    let review = create_step("review")
        .description("A person approves or rejects the draft")
        .resume_type::<Review>()
        .suspend_type::<Draft>()
        .execute(|draft: Draft, ctx| async move {
            let Some(data) = ctx.resume_data() else {
                return Err(ctx.suspend(&draft));
            };
            let review: Review = serde_json::from_value(data.clone())?;
            Ok(Reviewed {
                text: draft.text,
                approved: review.approved,
                note: review.note,
            })
        });
    let publish = create_step("publish")
        .description("Publishes an approved post")
        .execute(move |reviewed: Reviewed, _ctx| async move {
            tokio::time::sleep(delay).await;
            Ok(json!({
                "published": reviewed.approved,
                "text": reviewed.text,
                "note": reviewed.note,
            }))
        });
    Workflow::builder(PUBLISH_POST)
        .description("Drafts a post, waits for a person's review, and publishes it if approved")
        .input_type::<Topic>()
        .then(draft)
        .then(review)
        .then(publish)
        .commit()
}

fn research_brief(research: Agent, delay: Duration) -> Result<Workflow, WorkflowBuildError> {
    let brief = create_step("brief")
        .description("Frames the agent's notes")
        .execute(move |notes: Value, ctx| async move {
            tokio::time::sleep(delay).await;
            let topic = ctx.init_data()["topic"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            Ok(json!({
                "brief": format!(
                    "Brief on {topic}:\n{}",
                    notes["text"].as_str().unwrap_or_default()
                ),
            }))
        });
    Workflow::builder(RESEARCH_BRIEF)
        .description("The research agent takes notes on a topic, then they are framed as a brief")
        .input_type::<Topic>()
        .map(|topic, _ctx| async move {
            Ok(json!({"prompt": format!(
                "Research this topic: {}",
                topic["topic"].as_str().unwrap_or_default()
            )}))
        })
        .then(AgentStep::new(research))
        .then(brief)
        .commit()
}
