//! A network run is a workflow run of one step, the loop: it routes, runs the chosen
//! primitive and checks completion, iteration after iteration. The workflow machinery keeps
//! the run (its input, and what a stopped iteration waits for, as the step's suspend
//! payload), so a decision continues it in any process, and claims it, so one decision wins.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::call::{ABORTED, Network, NetworkInit};
use super::completion;
use super::primitives::{self, Exec, Outcome, Wait};
use super::records;
use super::routing::{self, Primitives, RoutingCall, RoutingFailure};
use crate::agent::Agent;
use crate::event::{
    ErrorPayload, EventKind, NetworkFinishPayload, NetworkStepFinishPayload, PrimitiveAbortPayload,
    PrimitiveType, RoutingAgentEndPayload, RoutingAgentStartPayload, RoutingDecision, RoutingInput,
    WorkflowUsage,
};
use crate::memory::MemoryScope;
use crate::workflow::{Step, StepContext, StepError};

/// Where the loop is.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoopState {
    pub iteration: u32,
    pub usage: WorkflowUsage,
    /// The last primitive's answer, for a router that then finds the task complete.
    #[serde(default)]
    pub last_result: Option<String>,
}

/// What a stopped iteration keeps (the step's suspend payload).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pending {
    state: LoopState,
    decision: RoutingDecision,
    wait: Wait,
}

/// The loop, as a workflow step.
pub(crate) struct NetworkStep {
    network: Arc<Network>,
    schema: Value,
}

impl NetworkStep {
    pub(crate) fn new(network: Arc<Network>) -> Self {
        Self {
            network,
            schema: Value::Bool(true),
        }
    }
}

fn aborted_decision(task: &str, iteration: u32) -> RoutingDecision {
    RoutingDecision {
        task: task.to_owned(),
        result: String::new(),
        primitive_id: "none".to_owned(),
        primitive_type: PrimitiveType::None,
        prompt: String::new(),
        is_complete: true,
        selection_reason: ABORTED.to_owned(),
        iteration,
        conversation_context: Vec::new(),
    }
}

#[async_trait::async_trait]
impl Step for NetworkStep {
    fn id(&self) -> &str {
        "network-loop"
    }

    fn description(&self) -> &str {
        "routes, runs the chosen primitive and checks completion, iteration after iteration"
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn output_schema(&self) -> &Value {
        &self.schema
    }

    fn retries(&self) -> Option<u32> {
        // A failed iteration has streamed and saved what it did: it is not run again.
        Some(0)
    }

    async fn execute(&self, ctx: StepContext) -> Result<Value, StepError> {
        let network = &self.network;
        let init: NetworkInit = serde_json::from_value(ctx.init_data().clone())
            .map_err(|e| StepError::new(format!("the network run's input is malformed: {e}")))?;
        let memory = network.memory()?;
        // Listed among the runtime's runs while it goes on, so an abort by its id reaches it
        // (`RunHandle::abort`, the server's `runs/{runId}/abort`). Ids are unique; a
        // live agent run with this one would keep it (the network then is not listed).
        let _listed = network
            .agent
            .runtime
            .runs
            .register(
                ctx.run_id(),
                ctx.abort_signal().clone(),
                crate::abort::AbortSignal::new(),
                None,
                Some(init.resource_id.clone()),
            )
            .ok();
        let scope = MemoryScope {
            thread_id: init.thread_id.clone(),
            resource_id: init.resource_id.clone(),
        };
        let exec = Exec {
            ctx: &ctx,
            network,
            init: &init,
            scope: scope.clone(),
            memory: Arc::clone(&memory),
            iteration: std::sync::Mutex::new(None),
        };
        let primitives = Primitives::of(&network.agent);
        let own = match network.agent.instructions_for(ctx.request_context()).await {
            Ok(own) => own,
            Err(error) => {
                // They may be read from a store or a service: the log gets the error's text.
                let message = "the network agent's instructions failed";
                tracing::warn!(agent = %network.agent.id(), %error, "{message}");
                exec.emit(error_event(message)).await;
                return Err(StepError::new(message));
            }
        };
        let router = routing::router(
            &network.agent,
            routing::instructions(
                &own,
                &primitives,
                network.options.routing.additional_instructions.as_deref(),
            ),
        );
        let schema = primitives.decision_schema();
        let call = RoutingCall {
            request_context: ctx.request_context().clone(),
            abort: ctx.abort_signal().clone(),
            model_settings: network.options.model_settings.clone(),
        };
        let (mut state, mut resumed) = match (ctx.suspend_data(), ctx.resume_data()) {
            (Some(pending), Some(data)) => {
                let pending: Pending = serde_json::from_value(pending.clone()).map_err(|e| {
                    StepError::new(format!(
                        "the stopped network run's record is malformed: {e}"
                    ))
                })?;
                (
                    pending.state,
                    Some((pending.decision, pending.wait, data.clone())),
                )
            }
            _ => (LoopState::default(), None),
        };
        loop {
            let iteration = state.iteration;
            // Each iteration a span under the network's step: its routing decision (the
            // routing agent's run) and its primitive's run hang under it.
            let mut span = ctx.trace.as_deref().and_then(|parent| {
                let mut span = parent.start(
                    crate::trace::SpanType::Generic,
                    format!("network iteration: {iteration}"),
                )?;
                span.entity("agent", network.agent.id(), Some(network.agent.name()));
                span.scope(ctx.run_id(), Some(&init.thread_id), Some(&init.resource_id));
                span.attribute("iteration", iteration);
                *exec.iteration.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(crate::trace::SpanParent {
                        tracer: parent.tracer.clone(),
                        context: span.context(),
                    });
                Some(span)
            });
            let (decision, outcome) = match resumed.take() {
                Some((decision, wait, data)) => {
                    let outcome =
                        primitives::resume(&exec, &decision, wait, data, &mut state.usage).await;
                    (decision, outcome)
                }
                None => {
                    match self
                        .route(&exec, &router, &schema, &primitives, &call, &mut state)
                        .await
                    {
                        Ok(routed) => routed,
                        Err(error) => {
                            // The iteration failed with the routing, not cancelled.
                            if let (Some(span), StepError::Failed { message }) =
                                (span.take(), &error)
                            {
                                span.fail(message.clone(), Some("routing"));
                            }
                            return Err(error);
                        }
                    }
                }
            };
            if let Some(span) = &mut span {
                span.attribute(
                    "primitiveType",
                    serde_json::to_value(decision.primitive_type)?,
                );
                span.attribute("primitiveId", decision.primitive_id.clone());
                span.input(decision.prompt.clone());
            }
            let result = match outcome {
                Outcome::Wait(wait) => {
                    if let Some(mut span) = span.take() {
                        span.attribute("suspended", true);
                        span.end();
                    }
                    return Err(ctx.suspend(Pending {
                        state,
                        decision,
                        wait,
                    }));
                }
                Outcome::Aborted => ABORTED.to_owned(),
                Outcome::Done(value) => records::result_text(&value),
                Outcome::Tripwire(tripwire) => {
                    // A processor stopped the primitive: the network stops with it.
                    if let Some(span) = span.take() {
                        span.fail(tripwire.reason.clone(), Some("tripwire"));
                    }
                    exec.emit(EventKind::Tripwire((*tripwire).clone())).await;
                    return Err(StepError::Tripwire { tripwire });
                }
            };
            let aborted = result == ABORTED;
            let last = iteration + 1 >= init.max_steps;
            let verdict = completion::check(
                &exec,
                &router,
                &decision,
                &result,
                state.last_result.as_deref(),
                last,
                &mut state.usage,
            )
            .await;
            if let Some(mut span) = span.take() {
                span.attribute("complete", verdict.passed);
                span.output(result.clone());
                span.end();
            }
            if decision.primitive_type != PrimitiveType::None {
                state.last_result = Some(result.clone());
            }
            if verdict.passed || last || aborted {
                let completion_reason = if verdict.passed {
                    verdict
                        .reason
                        .clone()
                        .unwrap_or_else(|| "Task complete".to_owned())
                } else {
                    format!("Max iterations reached: {}", init.max_steps)
                };
                let finish = NetworkFinishPayload {
                    task: init.task.clone(),
                    is_complete: verdict.passed,
                    completion_reason,
                    result: if aborted {
                        ABORTED.to_owned()
                    } else {
                        verdict.final_result.clone().unwrap_or(result)
                    },
                    primitive_id: decision.primitive_id.clone(),
                    primitive_type: decision.primitive_type,
                    iteration,
                    is_one_off: false,
                    thread_id: init.thread_id.clone(),
                    thread_resource_id: init.resource_id.clone(),
                    validation_passed: verdict.passed,
                    validation_feedback: (!verdict.passed).then(|| verdict.feedback.clone()),
                    usage: state.usage,
                };
                exec.emit(EventKind::NetworkFinish(finish.clone())).await;
                return Ok(serde_json::to_value(finish)?);
            }
            state.iteration += 1;
        }
    }
}

impl NetworkStep {
    /// Routes one iteration and runs its primitive.
    async fn route(
        &self,
        exec: &Exec<'_>,
        router: &Agent,
        schema: &Value,
        primitives: &Primitives,
        call: &RoutingCall,
        state: &mut LoopState,
    ) -> Result<(RoutingDecision, Outcome), StepError> {
        let init = exec.init;
        let iteration = state.iteration;
        let routing_abort = || {
            EventKind::RoutingAgentAbort(PrimitiveAbortPayload {
                primitive_type: "routing".to_owned(),
                primitive_id: super::ROUTING_AGENT_ID.to_owned(),
            })
        };
        if call.abort.is_aborted() {
            exec.emit(routing_abort()).await;
            return Ok((aborted_decision(&init.task, iteration), Outcome::Aborted));
        }
        let step_run_id = crate::id::new_id();
        exec.emit(EventKind::RoutingAgentStart(RoutingAgentStartPayload {
            network_id: self.network.agent.id().to_owned(),
            agent_id: super::ROUTING_AGENT_ID.to_owned(),
            run_id: step_run_id,
            input_data: RoutingInput {
                task: init.task.clone(),
                primitive_id: String::new(),
                primitive_type: PrimitiveType::None,
                result: state.last_result.clone(),
                iteration,
                thread_id: init.thread_id.clone(),
                thread_resource_id: init.resource_id.clone(),
                is_one_off: false,
                verbose_introspection: init.verbose_introspection,
            },
        }))
        .await;
        let history = exec.history().await;
        let prompt = routing::prompt(&init.task, primitives, init.verbose_introspection);
        let parent = exec.trace_parent();
        let routed = match routing::route(
            router,
            schema,
            history.clone(),
            prompt,
            call,
            parent.as_ref(),
        )
        .await
        {
            Ok(routed) => routed,
            Err(RoutingFailure::Aborted) => {
                exec.emit(routing_abort()).await;
                return Ok((aborted_decision(&init.task, iteration), Outcome::Aborted));
            }
            Err(RoutingFailure::Failed(message)) => {
                exec.emit(error_event(&message)).await;
                return Err(StepError::new(message));
            }
            Err(RoutingFailure::Tripwire(tripwire)) => {
                exec.emit(EventKind::Tripwire((*tripwire).clone())).await;
                return Err(StepError::Tripwire { tripwire });
            }
        };
        state.usage.add(&routed.usage);
        let chosen = routed.decision;
        let complete =
            chosen.primitive_id == "none" || chosen.primitive_type == PrimitiveType::None;
        // The id decides the kind: a router that names an agent a tool still means the agent.
        let kind = if complete {
            PrimitiveType::None
        } else {
            primitives
                .kind_of(&chosen.primitive_id)
                .unwrap_or(chosen.primitive_type)
        };
        let decision = RoutingDecision {
            task: init.task.clone(),
            result: if complete {
                chosen.selection_reason.clone()
            } else {
                String::new()
            },
            primitive_id: if complete {
                "none".to_owned()
            } else {
                chosen.primitive_id
            },
            primitive_type: kind,
            prompt: chosen.prompt,
            is_complete: complete,
            selection_reason: chosen.selection_reason,
            iteration,
            conversation_context: records::conversation_context(&history),
        };
        exec.emit(EventKind::RoutingAgentEnd(RoutingAgentEndPayload {
            decision: decision.clone(),
            run_id: routed.run_id,
            usage: routed.usage,
        }))
        .await;
        let outcome = if complete {
            exec.emit(EventKind::NetworkStepFinish(NetworkStepFinishPayload {
                task: init.task.clone(),
                result: decision.selection_reason.clone(),
                is_complete: true,
                iteration,
                run_id: exec.ctx.run_id().to_owned(),
            }))
            .await;
            Outcome::Done(Value::String(decision.selection_reason.clone()))
        } else {
            primitives::run(exec, &decision, &mut state.usage).await
        };
        Ok((decision, outcome))
    }
}

fn error_event(message: &str) -> EventKind {
    EventKind::Error(ErrorPayload {
        error: message.to_owned(),
        kind: "network".to_owned(),
    })
}
