//! What a tool can reach while it runs.

use std::sync::Arc;

use serde::Serialize;

use super::ToolError;
use super::extensions::Extensions;
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::event::{Event, EventKind, ToolOutputPayload};
use crate::sink::EventSink;

/// Context passed to every tool call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub(crate) run_id: Arc<str>,
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    pub(crate) thread_id: Option<String>,
    pub(crate) resource_id: Option<String>,
    pub(crate) request_context: RequestContext,
    pub(crate) abort: AbortSignal,
    pub(crate) writer: ToolWriter,
    pub(crate) resume_data: Option<serde_json::Value>,
    pub(crate) suspend_payload: Option<serde_json::Value>,
    /// The call's span, when the run is traced: what work it starts hangs under.
    pub(crate) trace: Option<crate::trace::TraceContext>,
    pub(crate) conversation: Option<crate::message::Transcript>,
    /// The run's step (0 for the first model call).
    pub(crate) step: u32,
    /// What the layers above hand to this call (the delegation hooks, a delegation's
    /// sub-agent run, a background task's settings...).
    pub(crate) extensions: Extensions,
}

impl ToolContext {
    /// A context for calling a tool outside an agent run (tests, direct execution).
    pub fn standalone(tool_name: impl Into<String>) -> Self {
        let run_id: Arc<str> = crate::id::new_id().into();
        let tool_name = tool_name.into();
        let tool_call_id = crate::id::new_id();
        Self {
            writer: ToolWriter {
                run_id: run_id.clone(),
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                sink: EventSink::discard(),
            },
            run_id,
            tool_call_id,
            tool_name,
            thread_id: None,
            resource_id: None,
            request_context: RequestContext::new(),
            abort: AbortSignal::new(),
            resume_data: None,
            suspend_payload: None,
            trace: None,
            conversation: None,
            step: 0,
            extensions: Extensions::new(),
        }
    }

    /// Sets the conversation [`ToolContext::conversation`] returns (for testing a tool on its
    /// own).
    pub fn with_conversation(mut self, messages: Vec<crate::message::Message>) -> Self {
        self.conversation = Some(messages.into());
        self
    }

    /// Sets the data [`ToolContext::resume_data`] returns (for testing a tool on its own).
    pub fn with_resume_data(mut self, data: serde_json::Value) -> Self {
        self.resume_data = Some(data);
        self
    }

    /// Sets the payload [`ToolContext::suspend_payload`] returns: what the call suspended
    /// with before this resume (for testing a tool on its own, and for layers that resume
    /// tools themselves, as workflows and networks do).
    pub fn with_suspend_payload(mut self, payload: serde_json::Value) -> Self {
        self.suspend_payload = Some(payload);
        self
    }

    /// Hands each output the tool writes ([`ToolContext::writer`]) to `listener`, for running
    /// a tool on its own and forwarding what it writes (an MCP server sends outputs with a
    /// numeric `progress` as progress notifications).
    pub fn with_output_listener(
        mut self,
        listener: impl Fn(&serde_json::Value) + Send + Sync + 'static,
    ) -> Self {
        let forward = move |event: &Event| {
            if let EventKind::ToolOutput(output) = &event.kind {
                listener(&output.output);
            }
        };
        self.writer.sink = EventSink::listen(crate::sink::Listener(Arc::new(forward)));
        self
    }

    /// Uses this request context.
    pub fn with_request_context(mut self, request_context: RequestContext) -> Self {
        self.request_context = request_context;
        self
    }

    /// Uses this abort signal.
    pub fn with_abort_signal(mut self, abort: AbortSignal) -> Self {
        self.abort = abort;
        self
    }

    /// Adds a value to [`ToolContext::extension`] (one per type).
    pub fn with_extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// The value of type `T` the layer running the tool handed to it, if any.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    /// The run this call belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The model's id for this call.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The conversation's thread, when the run uses memory.
    pub fn thread_id(&self) -> Option<&str> {
        self.thread_id.as_deref()
    }

    /// The thread's owner, when the run uses memory.
    pub fn resource_id(&self) -> Option<&str> {
        self.resource_id.as_deref()
    }

    /// The run's request context (shared with the run: `set` is visible to later steps).
    pub fn request_context(&self) -> &RequestContext {
        &self.request_context
    }

    /// Fires when the run is aborted; long-running tools should watch it.
    pub fn abort_signal(&self) -> &AbortSignal {
        &self.abort
    }

    /// Emits custom `tool-output` events into the run's stream.
    pub fn writer(&self) -> &ToolWriter {
        &self.writer
    }

    /// The run's conversation when the tool was called (without the system instructions), for
    /// tools that declare [`crate::tool::Tool::needs_conversation`]; empty for the others.
    pub fn conversation(&self) -> &[crate::message::Message] {
        self.conversation.as_deref().unwrap_or_default()
    }

    /// Stops the run until someone resumes this call; return it from `execute`:
    ///
    /// ```
    /// # use kestrel_core::tool::{ToolContext, ToolError};
    /// # use serde_json::{json, Value};
    /// async fn execute(ctx: ToolContext) -> Result<Value, ToolError> {
    ///     let Some(answer) = ctx.resume_data() else {
    ///         return Err(ctx.suspend(json!({"question": "Which city?"})));
    ///     };
    ///     Ok(json!({"city": answer["city"]}))
    /// }
    /// ```
    ///
    /// The run emits `tool-call-suspended` with `payload` (checked against the tool's suspend
    /// schema, if declared) and is saved; the run's handle's `resume` with the call's id
    /// (`agent.run(run_id).resume(call_id, data)`) runs `execute` again from the start, with
    /// the resume data in [`ToolContext::resume_data`]. Work done before `suspend` is
    /// therefore done again on resume: keep it idempotent.
    pub fn suspend(&self, payload: impl Serialize) -> ToolError {
        match serde_json::to_value(payload) {
            Ok(payload) => ToolError::suspension(payload),
            Err(e) => ToolError::new(format!("the suspend payload is not JSON: {e}")),
        }
    }

    /// The data this call was resumed with, after it suspended (already checked against the
    /// tool's resume schema, if declared; still untrusted input from a person).
    pub fn resume_data(&self) -> Option<&serde_json::Value> {
        self.resume_data.as_ref()
    }

    /// On a resume, the payload this call suspended with: what a tool that asks in several
    /// rounds carries from one round to the next (the answers so far, a server's state...),
    /// since a resume runs `execute` again from the start. `None` on a first call.
    pub fn suspend_payload(&self) -> Option<&serde_json::Value> {
        self.suspend_payload.as_ref()
    }

    /// The span of this call, when its run is traced ([`crate::trace`]): a tool that starts
    /// traced work (a sub-agent's run, a request to a service) puts it under this.
    pub fn trace_context(&self) -> Option<&crate::trace::TraceContext> {
        self.trace.as_ref()
    }

    /// Runs the call under `trace` (for layers that run tools themselves in a traced run).
    pub fn with_trace_context(mut self, trace: crate::trace::TraceContext) -> Self {
        self.trace = Some(trace);
        self
    }

    /// [`ToolContext::resume_data`], deserialised.
    pub fn resume_data_as<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>, ToolError> {
        self.resume_data
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| ToolError::new(format!("invalid resume data: {e}")))
    }
}

/// Writes custom `tool-output` events into the run's stream (a no-op under `generate`).
#[derive(Debug, Clone)]
pub struct ToolWriter {
    pub(crate) run_id: Arc<str>,
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    pub(crate) sink: EventSink,
}

impl ToolWriter {
    /// Whether anyone reads the run's events (false under `generate`): lets a tool skip
    /// preparing output nobody sees.
    pub fn is_observed(&self) -> bool {
        self.sink.is_observed()
    }

    /// Emits `output` as a `tool-output` event.
    pub async fn write(&self, output: impl Serialize) -> Result<(), ToolError> {
        if !self.sink.is_observed() {
            return Ok(());
        }
        let output = serde_json::to_value(output)?;
        self.sink
            .emit(Event::agent(
                self.run_id.clone(),
                EventKind::ToolOutput(ToolOutputPayload {
                    tool_call_id: self.tool_call_id.clone(),
                    tool_name: self.tool_name.clone(),
                    output,
                }),
            ))
            .await;
        Ok(())
    }

    /// Emits an event of the run itself (not nested under the call).
    pub(crate) async fn emit(&self, kind: EventKind) {
        if self.sink.is_observed() {
            self.sink
                .emit(Event::agent(self.run_id.clone(), kind))
                .await;
        }
    }
}
