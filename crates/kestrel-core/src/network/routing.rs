//! The routing agent: its instructions (the network agent's, and every primitive it may
//! choose), the decision it answers with as structured output, and one routing call.

use serde::Deserialize;
use serde_json::{Value, json};

use super::ROUTING_AGENT_ID;
use crate::agent::{Agent, RunOptions, StructuredOutput};
use crate::event::PrimitiveType;
use crate::message::Message;
use crate::model::{ModelSettings, Usage};

/// What the routing agent answers.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Decision {
    pub primitive_id: String,
    pub primitive_type: PrimitiveType,
    #[serde(default)]
    pub prompt: String,
    #[serde(default)]
    pub selection_reason: String,
}

/// The primitives a network may route to, by kind, with what the router is told of each.
pub(crate) struct Primitives {
    pub agents: Vec<(String, String)>,
    pub workflows: Vec<(String, String, Value)>,
    pub tools: Vec<(String, String, Value)>,
}

impl Primitives {
    pub(crate) fn of(agent: &Agent) -> Self {
        let agents = agent
            .sub_agent_ids()
            .into_iter()
            .filter_map(|id| agent.sub_agent(id))
            .map(|a| (a.id().to_owned(), a.description().to_owned()))
            .collect();
        let workflows = agent
            .workflows()
            .into_iter()
            .map(|w| {
                (
                    w.id().to_owned(),
                    w.description().to_owned(),
                    w.input_schema().clone(),
                )
            })
            .collect();
        let tools = agent
            .own_tool_ids()
            .iter()
            .filter_map(|id| agent.tools().get(id))
            .map(|t| {
                (
                    t.id().to_owned(),
                    t.description().to_owned(),
                    t.input_schema().clone(),
                )
            })
            .collect();
        Self {
            agents,
            workflows,
            tools,
        }
    }

    /// Every id the router may answer with, and `none`.
    fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .agents
            .iter()
            .map(|(id, _)| id.clone())
            .chain(self.workflows.iter().map(|(id, _, _)| id.clone()))
            .chain(self.tools.iter().map(|(id, _, _)| id.clone()))
            .collect();
        ids.sort();
        ids.dedup();
        ids.push("none".to_owned());
        ids
    }

    /// The schema of a decision: the ids are an enum, so a model that generates under the
    /// schema (the embedded one does, under a grammar) can only name a primitive that exists.
    pub(crate) fn decision_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "primitiveId": {
                    "type": "string",
                    "enum": self.ids(),
                    "description": "The id of the chosen agent, workflow or tool; none when the task is complete"
                },
                "primitiveType": {
                    "type": "string",
                    "enum": ["agent", "workflow", "tool", "none"],
                    "description": "What the primitive is; none when the task is complete"
                },
                "prompt": {
                    "type": "string",
                    "description": "For an agent, what to ask it; for a workflow or a tool, its input as JSON text"
                },
                "selectionReason": {
                    "type": "string",
                    "description": "Why this primitive"
                }
            },
            "required": ["primitiveId", "primitiveType", "prompt", "selectionReason"],
            "additionalProperties": false
        })
    }

    /// The kind of primitive `id` is, if it is one.
    pub(crate) fn kind_of(&self, id: &str) -> Option<PrimitiveType> {
        if self.agents.iter().any(|(a, _)| a == id) {
            Some(PrimitiveType::Agent)
        } else if self.workflows.iter().any(|(w, _, _)| w == id) {
            Some(PrimitiveType::Workflow)
        } else if self.tools.iter().any(|(t, _, _)| t == id) {
            Some(PrimitiveType::Tool)
        } else {
            None
        }
    }
}

fn list(lines: impl Iterator<Item = String>) -> String {
    let lines: Vec<String> = lines.collect();
    if lines.is_empty() {
        " - (none)".to_owned()
    } else {
        lines.join("\n")
    }
}

/// The routing agent's system prompt.
pub(crate) fn instructions(own: &str, primitives: &Primitives, additional: Option<&str>) -> String {
    let agents = list(
        primitives
            .agents
            .iter()
            .map(|(id, description)| format!(" - **{id}**: {description}")),
    );
    let workflows = list(
        primitives
            .workflows
            .iter()
            .map(|(id, description, schema)| {
                format!(" - **{id}**: {description}, input schema: {schema}")
            }),
    );
    let tools = list(primitives.tools.iter().map(|(id, description, schema)| {
        format!(" - **{id}**: {description}, input schema: {schema}")
    }));
    let mut text = format!(
        "You route a task through a network of agents, workflows and tools. Each time you are \
asked, you choose the one primitive that should act next, and what to give it; when the task \
is done, you choose primitiveId \"none\" with primitiveType \"none\".\n\n\
Earlier iterations are in the conversation: records whose text is JSON with \"isNetwork\": \
true (what each primitive was given and gave), and completion checks starting with \
\"{heading}\". Do not choose a primitive again with the same input unless it adds something \
the task needs.\n\n\
## System instructions\n{own}\n\n\
## Agents\n{agents}\n\n\
## Workflows (the prompt is JSON text matching the input schema)\n{workflows}\n\n\
## Tools (the prompt is JSON text matching the input schema)\n{tools}\n\n\
Choose only from these lists. For an agent, the prompt is what you would ask it in a chat. \
The user sees only the final answer, not the intermediate results.",
        heading = super::records::FEEDBACK_HEADING,
    );
    if let Some(additional) = additional {
        text.push_str("\n\n## Additional instructions\n");
        text.push_str(additional);
    }
    text
}

/// The prompt of one routing call.
pub(crate) fn prompt(task: &str, primitives: &Primitives, verbose: bool) -> String {
    let why = if verbose {
        "why you chose the primitive, and why not the others"
    } else {
        "why you chose the primitive"
    };
    let listed: Vec<String> = primitives
        .agents
        .iter()
        .map(|(id, _)| format!("{id} (agent)"))
        .chain(
            primitives
                .workflows
                .iter()
                .map(|(id, _, _)| format!("{id} (workflow)")),
        )
        .chain(
            primitives
                .tools
                .iter()
                .map(|(id, _, _)| format!("{id} (tool)")),
        )
        .collect();
    format!(
        "The task: {task}\n\nChoose the primitive that should act next on this task: {}. Give \
it the prompt it needs. Only when the conversation shows the task already done, choose \"none\". \
Answer with JSON: {{\"primitiveId\": string, \"primitiveType\": \"agent\" | \"workflow\" | \
\"tool\" | \"none\", \"prompt\": string, \"selectionReason\": {why}}}.",
        listed.join(", ")
    )
}

/// One routing call's answer.
pub(crate) struct Routed {
    pub decision: Decision,
    pub run_id: String,
    pub usage: Usage,
}

/// Why a routing call gave no decision.
#[derive(Debug)]
pub(crate) enum RoutingFailure {
    Aborted,
    Failed(String),
    /// A processor of the routing agent stopped its run.
    Tripwire(Box<crate::run::Tripwire>),
}

/// Asks the routing agent for the next decision (one model call, structured output; a
/// malformed answer is asked for once more).
pub(crate) async fn route(
    router: &Agent,
    schema: &Value,
    history: Vec<Message>,
    prompt: String,
    options: &RoutingCall,
    trace: Option<&crate::trace::SpanParent>,
) -> Result<Routed, RoutingFailure> {
    let mut usage = Usage::default();
    let mut last_error = String::new();
    for _ in 0..2 {
        let run_id = crate::id::new_id();
        let mut run = RunOptions::new()
            .run_id(run_id.clone())
            .max_steps(1)
            .context(history.clone())
            .structured_output(routing_output(schema))
            .request_context(options.request_context.clone())
            .abort_signal(options.abort.child());
        if let Some(settings) = &options.model_settings {
            run = run.model_settings(settings.clone());
        }
        // The routing agent's run is the iteration's routing decision in its trace.
        if let Some(parent) = trace {
            run = run
                .trace(parent.context.clone())
                .tracer(parent.tracer.clone());
        }
        match router.generate(prompt.clone()).options(run).await {
            Ok(result) => {
                usage.add(&result.usage);
                let decision = result
                    .object
                    .ok_or_else(|| "the routing agent gave no decision".to_owned())
                    .and_then(|o| {
                        serde_json::from_value::<Decision>(o)
                            .map_err(|e| format!("the routing agent's decision is malformed: {e}"))
                    });
                match decision {
                    Ok(decision) => {
                        return Ok(Routed {
                            decision,
                            run_id,
                            usage,
                        });
                    }
                    Err(error) => last_error = error,
                }
            }
            Err(_) if options.abort.is_aborted() => return Err(RoutingFailure::Aborted),
            Err(crate::definition::AgentError::Tripwire { tripwire, .. }) => {
                return Err(RoutingFailure::Tripwire(tripwire));
            }
            Err(error) => {
                // Its text may quote the provider: the log gets it, the run's error does not.
                tracing::warn!(%error, "a network's routing call failed");
                last_error = "the routing agent failed: the model provider failed".to_owned();
            }
        }
        if options.abort.is_aborted() {
            return Err(RoutingFailure::Aborted);
        }
    }
    Err(RoutingFailure::Failed(last_error))
}

fn routing_output(schema: &Value) -> StructuredOutput {
    let mut output = StructuredOutput::new(schema.clone());
    output.name = Some("routing".to_owned());
    output
}

/// What every routing call of a network shares.
pub(crate) struct RoutingCall {
    pub request_context: crate::context::RequestContext,
    pub abort: crate::abort::AbortSignal,
    pub model_settings: Option<ModelSettings>,
}

/// The routing agent of `agent`'s network, with these instructions.
pub(crate) fn router(agent: &Agent, instructions: String) -> Agent {
    agent.helper(ROUTING_AGENT_ID, "Routing Agent", instructions)
}
