//! The demo network of `kestrel dev`: **`coordinator`** routes a task, iteration by
//! iteration, to the `research` and `writing` agents, the `weather-report` workflow or the
//! `get_weather` tool, with its reason, until it finds the task done (run it with the Studio's
//! "Network" switch, or `POST /api/agents/coordinator/network`).

use kestrel::agent::{Agent, AgentBuildError};
use kestrel::memory::Memory;
use kestrel::model::ModelSpec;
use kestrel::tool::Tool;
use kestrel::workflow::Workflow;

/// The id of the demo network agent.
pub const COORDINATOR: &str = "coordinator";

/// The network agent over these primitives.
pub(super) fn coordinator(
    model: ModelSpec,
    memory: Memory,
    agents: [Agent; 2],
    weather_report: Option<Workflow>,
    weather: impl Tool + 'static,
) -> Result<Agent, AgentBuildError> {
    let builder = Agent::builder(COORDINATOR)
        .name("Coordinator (network)")
        .description(
            "A network: routes each step of a task to the research or writing agent, the \
             weather-report workflow or the weather tool, until the task is done.",
        )
        .instructions(
            "You coordinate a small team. Research facts with the research agent, have the \
             writing agent turn notes into prose, and get a city's weather with the \
             weather-report workflow (or get_weather). The task is done when the user has \
             what they asked for.",
        )
        .model(model)
        .memory(memory)
        .agents(agents)
        .tool(weather);
    match weather_report {
        Some(workflow) => builder.workflow(workflow),
        None => builder,
    }
    .build()
}
