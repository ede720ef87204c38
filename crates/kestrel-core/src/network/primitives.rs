//! Running the primitive a routing decision chose: a sub-agent (its events forwarded whole),
//! a workflow (likewise) or a tool, and continuing one that stopped for a person.
//!
//! A primitive's result is read by the routing model, kept in the thread and may end up as
//! the network's answer: a sub-agent or a workflow that fails gives the library's words for
//! it (`agent "x" failed (its run …)`), never its error's text, which may quote a provider
//! or a store and goes to the log. What the library writes about the router's own choice (no
//! such primitive, a prompt that does not fit) is kept, so the router can correct itself; a
//! tool's error is its own message for the model, as in an agent's run.

use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::call::{Network, NetworkInit};
use super::records;
use crate::agent::{Agent, RunOptions};
use crate::event::{
    AgentExecutionEndPayload, AgentExecutionStartPayload, AgentExecutionWaitPayload, EventKind,
    EventSource, PrimitiveAbortPayload, PrimitiveType, RoutingDecision, ToolExecutionArgs,
    ToolExecutionEndPayload, ToolExecutionStartPayload, ToolExecutionWaitPayload,
    WorkflowExecutionEndPayload, WorkflowExecutionStartPayload, WorkflowExecutionSuspendedPayload,
    WorkflowUsage,
};
use crate::memory::{AgentMemory, MemoryScope};
use crate::message::Message;
use crate::tool::{ApprovalContext, Stop, ToolContext};
use crate::workflow::{StepContext, WorkflowStatus};

/// What declining a network tool's call gives (Mastra's text).
pub(crate) const NOT_APPROVED: &str = "Tool call was not approved by the user";

/// What a primitive stopped on, kept until a decision continues it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Wait {
    /// A sub-agent's run waits on its call `tool_call_id`.
    #[serde(rename_all = "camelCase")]
    Agent {
        run_id: String,
        tool_call_id: String,
        approval: bool,
    },
    /// A workflow run is suspended.
    #[serde(rename_all = "camelCase")]
    Workflow { run_id: String, input: Value },
    /// The network's tool waits for approval, or suspended itself.
    #[serde(rename_all = "camelCase")]
    Tool {
        tool_call_id: String,
        input: Value,
        approval: bool,
    },
}

/// How a primitive's execution ended.
pub(crate) enum Outcome {
    /// With this result (also a failure, reported to the router as text).
    Done(Value),
    /// It waits for a person.
    Wait(Wait),
    /// The network was aborted.
    Aborted,
}

/// What running a primitive needs of the network's run.
pub(crate) struct Exec<'a> {
    pub ctx: &'a StepContext,
    pub network: &'a Network,
    pub init: &'a NetworkInit,
    pub scope: MemoryScope,
    pub memory: Arc<dyn AgentMemory>,
}

impl Exec<'_> {
    /// Sends a network event to the run's stream.
    pub(crate) async fn emit(&self, kind: EventKind) {
        self.ctx.run.emit(EventSource::Network, kind).await;
    }

    /// The thread's messages (read only).
    pub(crate) async fn history(&self) -> Vec<Message> {
        match self
            .memory
            .recall(&self.scope, &[], self.ctx.request_context())
            .await
        {
            Ok(recalled) => recalled.history,
            Err(error) => {
                tracing::warn!(thread = %self.scope.thread_id, %error, "a network could not read its thread");
                Vec::new()
            }
        }
    }

    /// Saves an iteration's record to the thread.
    async fn record(&self, decision: &RoutingDecision, input: Value, final_result: Value) {
        let message = records::iteration_record(
            decision.primitive_type,
            &decision.primitive_id,
            &decision.selection_reason,
            input,
            final_result,
        );
        records::save(self.memory.as_ref(), &self.scope, &[message]).await;
    }

    /// A failed execution in the library's words (`error` holds nothing of a provider or a
    /// store): recorded, and its text is the result the router reads.
    async fn failed(&self, decision: &RoutingDecision, input: Value, error: String) -> Outcome {
        tracing::debug!(primitive = %decision.primitive_id, %error, "a network primitive failed");
        self.record(decision, input, json!({"error": error})).await;
        Outcome::Done(Value::String(format!("Error: {error}")))
    }

    /// A primitive that failed of itself: `detail` (which may quote a provider or a store)
    /// goes to the log, and `public`, what failed in the library's words, is the failure.
    async fn broke(
        &self,
        decision: &RoutingDecision,
        input: Value,
        public: String,
        detail: String,
    ) -> Outcome {
        tracing::warn!(primitive = %decision.primitive_id, error = %detail, "{public}");
        self.failed(decision, input, public).await
    }

    fn aborted(&self) -> bool {
        self.ctx.abort_signal().is_aborted()
    }

    async fn abort(&self, kind: PrimitiveType, id: &str) -> Outcome {
        let payload = PrimitiveAbortPayload {
            primitive_type: kind.as_str().to_owned(),
            primitive_id: id.to_owned(),
        };
        self.emit(match kind {
            PrimitiveType::Agent => EventKind::AgentExecutionAbort(payload),
            PrimitiveType::Workflow => EventKind::WorkflowExecutionAbort(payload),
            _ => EventKind::ToolExecutionAbort(payload),
        })
        .await;
        Outcome::Aborted
    }
}

/// Runs the chosen primitive.
pub(crate) async fn run(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    usage: &mut WorkflowUsage,
) -> Outcome {
    match decision.primitive_type {
        PrimitiveType::Agent => agent(exec, decision, usage, None).await,
        PrimitiveType::Workflow => workflow(exec, decision, usage, None).await,
        PrimitiveType::Tool => tool(exec, decision, None).await,
        PrimitiveType::None => Outcome::Done(Value::String(decision.selection_reason.clone())),
    }
}

/// Continues the primitive a stopped iteration waits on, with the decision or data `data`.
pub(crate) async fn resume(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    wait: Wait,
    data: Value,
    usage: &mut WorkflowUsage,
) -> Outcome {
    match &wait {
        Wait::Agent { .. } => agent(exec, decision, usage, Some((wait, data))).await,
        Wait::Workflow { .. } => workflow(exec, decision, usage, Some((wait, data))).await,
        Wait::Tool { .. } => tool(exec, decision, Some((wait, data))).await,
    }
}

fn approved(data: &Value) -> (bool, Option<String>) {
    let approved = data
        .get("approved")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let reason = data
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (approved, reason)
}

async fn agent(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    usage: &mut WorkflowUsage,
    continuing: Option<(Wait, Value)>,
) -> Outcome {
    let id = &decision.primitive_id;
    let prompt = json!(decision.prompt);
    let Some(sub) = exec.network.agent.sub_agent(id) else {
        let known = exec.network.agent.sub_agent_ids().join(", ");
        return exec
            .failed(
                decision,
                prompt,
                format!("there is no agent {id:?} (the agents: {known})"),
            )
            .await;
    };
    if exec.aborted() {
        return exec.abort(PrimitiveType::Agent, id).await;
    }
    let run_id = match &continuing {
        Some((Wait::Agent { run_id, .. }, _)) => run_id.clone(),
        _ => crate::id::new_id(),
    };
    exec.emit(EventKind::AgentExecutionStart(AgentExecutionStartPayload {
        agent_id: id.clone(),
        args: decision.clone(),
        run_id: run_id.clone(),
    }))
    .await;
    let options = RunOptions::new()
        .request_context(exec.ctx.request_context().clone())
        .abort_signal(exec.ctx.abort_signal().child());
    let opened = match continuing {
        Some((
            Wait::Agent {
                tool_call_id,
                approval,
                ..
            },
            data,
        )) => {
            let run = sub.run(run_id.clone()).options(options);
            let decided = if approval {
                match approved(&data) {
                    (true, _) => run.approve(tool_call_id),
                    (false, reason) => run.decline(tool_call_id, reason),
                }
            } else {
                run.resume(tool_call_id, data)
            };
            decided.stream().await.map_err(|e| e.to_string())
        }
        _ => sub
            .stream(decision.prompt.clone())
            .options(
                options
                    .run_id(run_id.clone())
                    .context(decision.conversation_context.clone()),
            )
            .await
            .map_err(|e| e.to_string()),
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => {
            let public = format!("agent {id:?} could not run (its run {run_id})");
            return exec.broke(decision, prompt, public, error).await;
        }
    };
    let mut waiting: Option<(String, bool, String, Option<Value>)> = None;
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::ToolCallApproval(p) if waiting.is_none() => {
                waiting = Some((p.tool_call_id.clone(), true, p.resume_schema.clone(), None));
            }
            EventKind::ToolCallSuspended(p) if waiting.is_none() => {
                waiting = Some((
                    p.tool_call_id.clone(),
                    false,
                    p.resume_schema.clone(),
                    Some(p.suspend_payload.clone()),
                ));
            }
            _ => {}
        }
        exec.emit(EventKind::AgentExecutionEvent(Box::new(event)))
            .await;
    }
    let result = match stream.result().await {
        Ok(result) => result,
        Err(_) if exec.aborted() => return exec.abort(PrimitiveType::Agent, id).await,
        Err(error) => {
            let public = format!("agent {id:?} failed (its run {run_id})");
            return exec
                .broke(decision, prompt, public, error.to_string())
                .await;
        }
    };
    usage.add(&result.usage);
    if exec.aborted() {
        return exec.abort(PrimitiveType::Agent, id).await;
    }
    if let Some(call) = result.waiting.first() {
        let (tool_call_id, approval, resume_schema, suspend_payload) = match waiting {
            Some(seen) if seen.0 == call.tool_call_id => seen,
            _ => {
                let approval = call.waiting == crate::run::Waiting::Approval;
                let schema = if approval {
                    crate::agent::APPROVAL_RESUME_SCHEMA.to_owned()
                } else {
                    String::new()
                };
                (call.tool_call_id.clone(), approval, schema, None)
            }
        };
        let payload = AgentExecutionWaitPayload {
            args: json!({"prompt": decision.prompt}),
            agent_id: id.clone(),
            run_id: run_id.clone(),
            tool_name: id.clone(),
            tool_call_id: id.clone(),
            usage: result.usage,
            selection_reason: decision.selection_reason.clone(),
            resume_schema,
            suspend_payload,
        };
        exec.emit(if approval {
            EventKind::AgentExecutionApproval(payload)
        } else {
            EventKind::AgentExecutionSuspended(payload)
        })
        .await;
        return Outcome::Wait(Wait::Agent {
            run_id,
            tool_call_id,
            approval,
        });
    }
    exec.emit(EventKind::AgentExecutionEnd(AgentExecutionEndPayload {
        task: exec.init.task.clone(),
        agent_id: id.clone(),
        result: result.text.clone(),
        is_complete: false,
        iteration: decision.iteration,
        run_id,
        usage: result.usage,
    }))
    .await;
    exec.record(decision, prompt, json!({"text": result.text}))
        .await;
    Outcome::Done(Value::String(result.text))
}

/// The prompt of a workflow or a tool, as JSON (a fenced block is accepted).
fn parse_prompt(prompt: &str) -> Result<Value, String> {
    serde_json::from_str(crate::schema::unfenced(prompt))
        .map_err(|e| format!("the prompt is not valid JSON ({e}): {prompt:?}"))
}

/// The prompt of a workflow or a tool, parsed, and what is wrong with it under the
/// primitive's input schema (`violations`, from its validator compiled once).
fn checked_input(
    prompt: &str,
    what: &str,
    violations: impl FnOnce(&Value) -> Vec<String>,
) -> Result<Value, String> {
    let input = parse_prompt(prompt).map_err(|e| format!("{what}: {e}"))?;
    let errors = violations(&input);
    if errors.is_empty() {
        Ok(input)
    } else {
        Err(format!(
            "{what}: the input does not match its input schema: {}",
            errors.join("; ")
        ))
    }
}

/// The agent's workflow `id` as its network runs it: its runs kept in the instance's workflow
/// store unless its builder was given one, and, in a cluster, leased and fenced there as a
/// registered workflow's runs are. Without the lease another instance's sweep would take a
/// run this one drives for one left behind, and run its steps a second time.
fn held_workflow(agent: &Agent, id: &str) -> Option<crate::workflow::Workflow> {
    let workflow = agent.workflow(id)?;
    let workflow = if workflow.has_own_store() {
        workflow
    } else {
        workflow.with_store(Arc::clone(&agent.stores().workflows))
    };
    match &agent.runtime.runs.cluster {
        Some(cluster) if workflow.inner.cluster.is_none() => {
            Some(workflow.with_cluster(Some(Arc::clone(cluster))))
        }
        _ => Some(workflow),
    }
}

async fn workflow(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    usage: &mut WorkflowUsage,
    continuing: Option<(Wait, Value)>,
) -> Outcome {
    let id = &decision.primitive_id;
    let Some(workflow) = held_workflow(&exec.network.agent, id) else {
        let known: Vec<String> = exec
            .network
            .agent
            .workflows()
            .iter()
            .map(|w| w.id().to_owned())
            .collect();
        return exec
            .failed(
                decision,
                json!(decision.prompt),
                format!(
                    "there is no workflow {id:?} (the workflows: {})",
                    known.join(", ")
                ),
            )
            .await;
    };
    let (run_id, input, resume) = match continuing {
        Some((Wait::Workflow { run_id, input }, data)) => (run_id, input, Some(data)),
        _ => {
            let what = format!("workflow {id:?}");
            let check =
                |input: &Value| crate::schema::violations(&workflow.inner.input_validator, input);
            match checked_input(&decision.prompt, &what, check) {
                Ok(input) => (crate::id::new_id(), input, None),
                Err(error) => return exec.failed(decision, json!(decision.prompt), error).await,
            }
        }
    };
    if exec.aborted() {
        return exec.abort(PrimitiveType::Workflow, id).await;
    }
    exec.emit(EventKind::WorkflowExecutionStart(
        WorkflowExecutionStartPayload {
            workflow_id: id.clone(),
            args: decision.clone(),
            run_id: run_id.clone(),
        },
    ))
    .await;
    let run = workflow
        .create_run_with_id(&run_id)
        .resource(exec.init.resource_id.clone())
        .request_context(exec.ctx.request_context().clone())
        .with_abort(exec.ctx.abort_signal().child());
    let opened = match resume {
        Some(data) => run.resume_stream(None, data).await,
        None => run.stream(input.clone()).await,
    };
    let could_not_run = |error: &crate::workflow::WorkflowRunError| {
        format!(
            "workflow {id:?} could not run (its run {run_id}): {}",
            error.public_text(id, &run_id)
        )
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => {
            return exec
                .broke(decision, input, could_not_run(&error), error.to_string())
                .await;
        }
    };
    let mut run_usage = WorkflowUsage::default();
    while let Some(event) = stream.next().await {
        if let EventKind::WorkflowFinish(finish) = &event.kind {
            run_usage = finish.output.usage;
        }
        exec.emit(EventKind::WorkflowExecutionEvent(Box::new(event)))
            .await;
    }
    let result = match stream.result().await {
        Ok(result) => result,
        Err(error) => {
            return exec
                .broke(decision, input, could_not_run(&error), error.to_string())
                .await;
        }
    };
    usage.add_all(&run_usage);
    if result.status == WorkflowStatus::Canceled && exec.aborted() {
        return exec.abort(PrimitiveType::Workflow, id).await;
    }
    if result.status == WorkflowStatus::Suspended {
        let path = result.suspended.first().cloned().unwrap_or_default();
        let mut suspend_payload = path
            .first()
            .and_then(|step| result.suspend_payload.get(step))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(object) = suspend_payload.as_object_mut() {
            object.remove("__workflow_meta");
        }
        let resume_schema = path
            .first()
            .and_then(|step| workflow.step(step))
            .and_then(|step| step.resume_schema())
            .map(Value::to_string)
            .unwrap_or_default();
        exec.emit(EventKind::WorkflowExecutionSuspended(
            WorkflowExecutionSuspendedPayload {
                args: input.clone(),
                workflow_id: id.clone(),
                suspend_payload,
                resume_schema,
                name: workflow.id().to_owned(),
                run_id: run_id.clone(),
                usage: run_usage,
                selection_reason: decision.selection_reason.clone(),
                tool_name: id.clone(),
                tool_call_id: id.clone(),
            },
        ))
        .await;
        return Outcome::Wait(Wait::Workflow { run_id, input });
    }
    let succeeded = result.status == WorkflowStatus::Success;
    // The step's error stays in the run (its snapshot) and the log.
    let failure = (!succeeded).then(|| {
        format!(
            "workflow {id:?} {} (its run {run_id})",
            result.status.as_str()
        )
    });
    if let (Some(failure), Some(error)) = (&failure, &result.error) {
        tracing::warn!(primitive = %id, error = %error.message, "{failure}");
    }
    let summary = json!({
        "runId": run_id,
        "status": result.status,
        "runResult": result.result,
        "error": failure,
        "runSuccess": succeeded,
    });
    exec.emit(EventKind::WorkflowExecutionEnd(
        WorkflowExecutionEndPayload {
            task: exec.init.task.clone(),
            primitive_id: id.clone(),
            primitive_type: PrimitiveType::Workflow,
            result: serde_json::to_value(&result).unwrap_or(Value::Null),
            is_complete: false,
            iteration: decision.iteration,
            name: workflow.id().to_owned(),
            run_id,
            usage: run_usage,
        },
    ))
    .await;
    exec.record(decision, input, summary).await;
    match failure {
        None => Outcome::Done(result.result.unwrap_or(Value::Null)),
        Some(failure) => Outcome::Done(Value::String(format!("Error: {failure}"))),
    }
}

async fn tool(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    continuing: Option<(Wait, Value)>,
) -> Outcome {
    let id = &decision.primitive_id;
    let agent = &exec.network.agent;
    let tool = agent
        .own_tool_ids()
        .iter()
        .any(|t| t == id)
        .then(|| agent.tools().get(id).cloned())
        .flatten();
    let Some(tool) = tool else {
        return exec
            .failed(
                decision,
                json!(decision.prompt),
                format!(
                    "there is no tool {id:?} (the tools: {})",
                    agent.own_tool_ids().join(", ")
                ),
            )
            .await;
    };
    let (tool_call_id, input, decided) = match continuing {
        Some((
            Wait::Tool {
                tool_call_id,
                input,
                approval,
            },
            data,
        )) => (tool_call_id, input, Some((approval, data))),
        _ => {
            let what = format!("tool {id:?}");
            let check = |input: &Value| match agent.tools().validate(id, input) {
                Err(crate::tool::ToolCallError::InvalidInput { errors, .. }) => errors,
                _ => Vec::new(),
            };
            match checked_input(&decision.prompt, &what, check) {
                Ok(input) => (crate::id::new_id(), input, None),
                Err(error) => return exec.failed(decision, json!(decision.prompt), error).await,
            }
        }
    };
    if exec.aborted() {
        return exec.abort(PrimitiveType::Tool, id).await;
    }
    exec.emit(EventKind::ToolExecutionStart(ToolExecutionStartPayload {
        args: ToolExecutionArgs {
            decision: decision.clone(),
            args: input.clone(),
            tool_name: id.clone(),
            tool_call_id: tool_call_id.clone(),
        },
        run_id: exec.ctx.run_id().to_owned(),
    }))
    .await;
    let end = |result: Value| {
        EventKind::ToolExecutionEnd(ToolExecutionEndPayload {
            task: exec.init.task.clone(),
            primitive_id: id.clone(),
            primitive_type: PrimitiveType::Tool,
            result,
            is_complete: false,
            iteration: decision.iteration,
            tool_call_id: tool_call_id.clone(),
            tool_name: id.clone(),
        })
    };
    let mut resume_data = None;
    match decided {
        None => {
            let ctx = ApprovalContext {
                tool_name: id,
                request_context: exec.ctx.request_context(),
                thread_id: Some(&exec.init.thread_id),
                resource_id: Some(&exec.init.resource_id),
            };
            if agent.requires_approval(&input, &ctx) {
                exec.emit(EventKind::ToolExecutionApproval(ToolExecutionWaitPayload {
                    tool_name: id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    args: input.clone(),
                    selection_reason: decision.selection_reason.clone(),
                    run_id: exec.ctx.run_id().to_owned(),
                    resume_schema: crate::agent::APPROVAL_RESUME_SCHEMA.to_owned(),
                    suspend_payload: None,
                }))
                .await;
                return Outcome::Wait(Wait::Tool {
                    tool_call_id,
                    input,
                    approval: true,
                });
            }
        }
        Some((true, data)) => {
            if let (false, reason) = approved(&data) {
                let text = match reason {
                    Some(reason) => format!("{NOT_APPROVED}: {reason}"),
                    None => NOT_APPROVED.to_owned(),
                };
                exec.emit(end(Value::String(text.clone()))).await;
                exec.record(
                    decision,
                    input,
                    json!({"result": text, "toolCallId": tool_call_id}),
                )
                .await;
                return Outcome::Done(Value::String(text));
            }
        }
        Some((false, data)) => resume_data = Some(data),
    }
    let mut ctx = ToolContext::standalone(id.clone())
        .with_request_context(exec.ctx.request_context().clone())
        .with_abort_signal(exec.ctx.abort_signal().child());
    ctx.run_id = exec.ctx.run_id().into();
    ctx.tool_call_id = tool_call_id.clone();
    ctx.thread_id = Some(exec.init.thread_id.clone());
    ctx.resource_id = Some(exec.init.resource_id.clone());
    if let Some(data) = resume_data {
        ctx = ctx.with_resume_data(data);
    }
    match tool.execute(input.clone(), ctx).await {
        Ok(result) => {
            exec.emit(end(result.clone())).await;
            exec.record(
                decision,
                input,
                json!({"result": result, "toolCallId": tool_call_id}),
            )
            .await;
            Outcome::Done(result)
        }
        Err(error) => match error.into_stop() {
            Ok(Stop::Suspend(payload)) => {
                exec.emit(EventKind::ToolExecutionSuspended(
                    ToolExecutionWaitPayload {
                        tool_name: id.clone(),
                        tool_call_id: tool_call_id.clone(),
                        args: input.clone(),
                        selection_reason: decision.selection_reason.clone(),
                        run_id: exec.ctx.run_id().to_owned(),
                        resume_schema: tool
                            .resume_schema()
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        suspend_payload: Some(payload),
                    },
                ))
                .await;
                Outcome::Wait(Wait::Tool {
                    tool_call_id,
                    input,
                    approval: false,
                })
            }
            Ok(_) | Err(_) if exec.aborted() => exec.abort(PrimitiveType::Tool, id).await,
            Ok(_) => {
                exec.failed(decision, input, format!("tool {id:?} stopped the run"))
                    .await
            }
            Err(error) => {
                let text = format!("Error: tool {id:?} failed: {}", error.message());
                exec.emit(end(Value::String(text.clone()))).await;
                exec.record(
                    decision,
                    input,
                    json!({"error": text, "toolCallId": tool_call_id}),
                )
                .await;
                Outcome::Done(Value::String(text))
            }
        },
    }
}
