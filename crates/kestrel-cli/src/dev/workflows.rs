//! The demo workflows of `kestrel dev`, on the embedded defaults:
//!
//! - **`weather-report`** (parallel arms and a branch): `forecast` the city's weather, then
//!   `temperature` and `sky` at once, then `warm` or `cool` (whichever holds), then `report`.
//! - **`publish-post`** (a person in the loop): `draft` a post on a topic, `review` suspends
//!   until a person approves or rejects it (a resume form in the Studio), then `publish`.
//! - **`research-brief`** (an agent step): the `research` agent writes notes on a topic, and
//!   `brief` frames them.
//!
//! Each plain step takes the demo's delay first (`--tool-delay-ms`), as real work would: long
//! enough, it lets one watch a run step by step, or kill the process between two steps and
//! see the next one continue the run. With a [`super::Ledger`], each records its work there.

use std::pin::Pin;
use std::sync::Arc;

use kestrel::agent::{Agent, AgentStep};
use kestrel::workflow::{StepContext, StepError, Workflow, WorkflowBuildError, create_step, when};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ledger::Work;

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

/// The three demo workflows; `research` is the agent of `research-brief`, `work` what each
/// plain step does first.
pub(super) fn demo_workflows(
    research: Agent,
    work: &Work,
) -> Result<Vec<Workflow>, WorkflowBuildError> {
    Ok(vec![
        weather_report(work)?,
        publish_post(work)?,
        research_brief(research, work)?,
    ])
}

/// A step's answer, boxed.
type Answer<O> = Pin<Box<dyn Future<Output = Result<O, StepError>> + Send>>;

/// A step's `execute` function that does the step's `work` first, then `f`.
fn after_work<I, O, F, Fut>(
    work: &Work,
    f: F,
) -> impl Fn(I, StepContext) -> Answer<O> + use<I, O, F, Fut>
where
    I: Send + 'static,
    F: Fn(I, StepContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, StepError>> + Send + 'static,
{
    let (work, f) = (work.clone(), Arc::new(f));
    move |input, ctx| {
        let (work, f) = (work.clone(), Arc::clone(&f));
        Box::pin(async move {
            work.done("step", ctx.run_id(), ctx.step_id()).await;
            f(input, ctx).await
        })
    }
}

fn weather_report(work: &Work) -> Result<Workflow, WorkflowBuildError> {
    let forecast = create_step("forecast")
        .description("Gets the city's weather (demo data)")
        .execute(after_work(work, |city: City, _ctx| async move {
            let weather = super::demo_weather(&city.city);
            Ok(Forecast {
                city: city.city.trim().to_owned(),
                sky: weather["sky"].as_str().unwrap_or_default().to_owned(),
                temperature_c: weather["temperatureC"].as_i64().unwrap_or_default(),
            })
        }));
    let temperature = create_step("temperature")
        .description("Reads the temperature")
        .execute(after_work(work, |f: Forecast, _ctx| async move {
            Ok(json!({"celsius": f.temperature_c}))
        }));
    let sky = create_step("sky")
        .description("Reads the sky")
        .execute(after_work(work, |f: Forecast, _ctx| async move {
            Ok(json!({"sky": f.sky}))
        }));
    let warm = create_step("warm")
        .description("Advice for a warm day")
        .execute(|_: Value, _ctx| async { Ok(json!({"advice": "light clothes will do"})) });
    let cool = create_step("cool")
        .description("Advice for a cool day")
        .execute(|_: Value, _ctx| async { Ok(json!({"advice": "bring a jacket"})) });
    let report = create_step("report")
        .description("Writes the report")
        .execute(after_work(work, |arms: Value, ctx| async move {
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
        }));
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

fn publish_post(work: &Work) -> Result<Workflow, WorkflowBuildError> {
    let draft = create_step("draft")
        .description("Drafts the post")
        .execute(after_work(work, |topic: Topic, _ctx| async move {
            Ok(Draft {
                text: format!("Notes on {}: what it is, and why it matters.", topic.topic),
                topic: topic.topic,
            })
        }));
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
        .execute(after_work(work, |reviewed: Reviewed, _ctx| async move {
            Ok(json!({
                "published": reviewed.approved,
                "text": reviewed.text,
                "note": reviewed.note,
            }))
        }));
    Workflow::builder(PUBLISH_POST)
        .description("Drafts a post, waits for a person's review, and publishes it if approved")
        .input_type::<Topic>()
        .then(draft)
        .then(review)
        .then(publish)
        .commit()
}

fn research_brief(research: Agent, work: &Work) -> Result<Workflow, WorkflowBuildError> {
    let brief = create_step("brief")
        .description("Frames the agent's notes")
        .execute(after_work(work, |notes: Value, ctx| async move {
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
        }));
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
