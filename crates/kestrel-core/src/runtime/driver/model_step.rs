//! The model call of a step: resolving the model and instructions, the request, and the
//! stream of the answer turned into events and recorded in the state.

use futures::StreamExt;

use super::processors::{Verdict, replace_held_text};
use super::{AgentRun, now_ms};
use crate::definition::{AgentError, Instructions, ModelSource};
use crate::event::{
    EventKind, PartIdPayload, StepFinishPayload, StepOutput, StepResultInfo, StepStartPayload,
    TextDeltaPayload, ToolCallDeltaPayload, ToolCallIdPayload, ToolCallPayload,
    ToolCallStreamingStartPayload,
};
use crate::model::{
    FinishReason, ModelError, ModelEvent, ModelRequest, ResponseFormat, SharedModel, ToolChoice,
    Usage,
};
use crate::processor::{Phases, ProcessorPhase, Stopped, StreamState};
use crate::run::{ToolCallRecord, parse_call};
use crate::trace::SpanType;

impl AgentRun {
    pub(super) async fn resolve(&mut self) -> Result<(SharedModel, Option<String>), AgentError> {
        if let (Some(model), Some(system)) = (&self.model, &self.system) {
            return Ok((model.clone(), system.clone()));
        }
        if !self.version_resolved {
            self.use_version().await?;
        }
        let inner = &self.agent.inner;
        let run_id = self.state.run_id.clone();
        let model = match &inner.model {
            ModelSource::Fixed(m) => m.clone(),
            ModelSource::Dynamic(f) => {
                let spec = f(self.request_context.clone()).await.map_err(|source| {
                    AgentError::Dynamic {
                        run_id: run_id.clone(),
                        what: "model",
                        source,
                    }
                })?;
                let registry = inner.own_registry.as_ref();
                spec.resolve(registry.unwrap_or(&self.agent.runtime.models))
                    .map_err(|source| AgentError::ModelResolution {
                        run_id: run_id.clone(),
                        source,
                    })?
            }
        };
        let system = match &inner.instructions {
            Instructions::Static(s) => (!s.is_empty()).then(|| s.to_string()),
            Instructions::Dynamic(f) => {
                let s = f(self.request_context.clone()).await.map_err(|source| {
                    AgentError::Dynamic {
                        run_id,
                        what: "instructions",
                        source,
                    }
                })?;
                (!s.is_empty()).then_some(s)
            }
        };
        if let Some(skills) = &inner.skills {
            let skills = skills
                .resolve(&self.request_context)
                .await
                .map_err(|source| AgentError::Dynamic {
                    run_id: self.state.run_id.clone(),
                    what: "skills",
                    source: Box::new(source),
                })?;
            self.skill_system = crate::skill::system_messages(&skills);
        }
        self.model = Some(model.clone());
        self.system = Some(system.clone());
        Ok((model, system))
    }

    /// Runs the agent's version the run chose (or, resumed, the one it ran before): the agent
    /// is seen through it for the rest of the run. An agent without stored versions, or
    /// whose chosen status has none, runs its own definition.
    async fn use_version(&mut self) -> Result<(), AgentError> {
        self.version_resolved = true;
        let Some(store) = self.agent.version_store() else {
            return Ok(());
        };
        let settings = &self.state.settings;
        let agent_id = self.agent.id().to_owned();
        let choice = match &settings.version_id {
            Some(id) => crate::version::VersionChoice::id(id),
            None => settings.versions.choice_for(&agent_id),
        };
        let failed = |source: crate::version::VersionError| AgentError::Version {
            run_id: self.state.run_id.clone(),
            source,
        };
        let Some(version) = self
            .agent
            .resolve_version(&store, &choice)
            .await
            .map_err(failed)?
        else {
            return Ok(());
        };
        self.agent = self.agent.with_version(&version).map_err(failed)?;
        if let Some(max_steps) = version
            .config
            .default_options
            .as_ref()
            .and_then(|o| o.max_steps)
            && !self.max_steps_chosen
            && self.state.settings.version_id.is_none()
        {
            self.state.max_steps = max_steps.max(1);
        }
        self.state.settings.version_id = Some(version.id);
        Ok(())
    }

    pub(super) async fn model_phase(&mut self) -> Result<(), AgentError> {
        // Errors are consumed in the statements that awaited them (see `or_fail!`).
        let (model, system) = {
            let prepared = match self.before_model_call().await {
                Ok(v) => Ok(v),
                // A background task's result that could not be stored has failed the run
                // already.
                Err(e) if self.error_handled => return Err(e),
                Err(e) => Err(self.fail(e)),
            };
            match prepared {
                Ok(v) => v,
                Err(failing) => return Err(failing.await),
            }
        };
        if self.state.is_finished() {
            // An input processor stopped the run.
            return Ok(());
        }
        or_fail!(self, self.call_model(model, system));
        Ok(())
    }

    /// What a model call needs first: the model and instructions, the thread's memory, the
    /// messages delivered to the run and its background tasks' results.
    async fn before_model_call(&mut self) -> Result<(SharedModel, Option<String>), AgentError> {
        if self.abort.is_aborted() {
            return Err(self.aborted());
        }
        let resolved = self.resolve().await?;
        if !self.state.started && self.agent.inner.processors.input.has(ProcessorPhase::Input) {
            // Boxed: runs without input processors never await it.
            let message_id = self.state.next_message_id.clone();
            Box::pin(self.announce_start(&message_id)).await;
            if Box::pin(self.process_input()).await? {
                return Ok(resolved);
            }
        }
        self.load_memory().await?;
        self.take_delivered().await?;
        if self.background.is_some() {
            // Boxed: inline, it would take room in the future of every run.
            Box::pin(self.take_background_ready()).await?;
        }
        Ok(resolved)
    }

    pub(super) async fn call_model(
        &mut self,
        model: SharedModel,
        system: Option<String>,
    ) -> Result<(), AgentError> {
        let message_id = self.state.next_message_id.clone();
        let sink = self.sink.clone();
        let run_id = self.run_id.clone();
        self.announce_start(&message_id).await;
        let request = if self
            .agent
            .inner
            .processors
            .input
            .has(ProcessorPhase::InputStep)
        {
            let mut request = self.model_request(system.clone());
            if Box::pin(self.process_input_step(&mut request, system)).await? {
                return Ok(());
            }
            request
        } else {
            self.model_request(system)
        };
        emit!(
            sink,
            run_id,
            EventKind::StepStart(StepStartPayload {
                message_id: message_id.clone(),
                started_at: now_ms(),
                warnings: Vec::new(),
            })
        );

        // The model call's span, under the run's (when the instance traces).
        let mut model_span = self.span.as_ref().and_then(|run_span| {
            let name = format!("llm: '{}'", model.model_id());
            let mut span = run_span.child(SpanType::ModelGeneration, name)?;
            span.attribute("model", model.model_id());
            span.attribute("provider", model.provider());
            span.attribute("stepIndex", self.state.steps.len());
            span.attribute("messages", self.state.messages.len());
            if let Some(last) = self.state.messages.last() {
                span.input(last.text());
            }
            Some(span)
        });
        let model_error = |source: ModelError| match source {
            ModelError::Cancelled => AgentError::Aborted {
                run_id: run_id.to_string(),
            },
            source => AgentError::Model {
                run_id: run_id.to_string(),
                source,
            },
        };
        let abort = self.abort.clone();
        let mut stream = tokio::select! {
            biased;
            _ = abort.aborted() => return Err(self.aborted()),
            s = model.stream(request) => match s {
                Ok(stream) => stream,
                Err(source) => {
                    if let Some(span) = model_span.take() {
                        span.fail(source.to_string(), Some("model"));
                    }
                    return Box::pin(self.model_failed(source, false, message_id)).await;
                }
            },
        };
        // With output processors, the step's parts are held until they accepted them (see
        // `crate::processor`); without, each goes out as it comes.
        let mut held: Option<Vec<EventKind>> =
            (sink.is_observed() && self.agent.inner.processors.holds_back()).then(Vec::new);
        // Whether a part of this answer reached the stream already.
        let mut streamed = false;
        let stream_hooks = self
            .agent
            .inner
            .processors
            .output
            .has(ProcessorPhase::OutputStream)
            .then(|| self.agent.inner.processors.output.clone());
        let mut stream_states: Vec<StreamState> = Vec::new();
        // Sends (or holds) one event of the step.
        macro_rules! out {
            ($kind:expr) => {
                if sink.is_observed() {
                    let kind = $kind;
                    match held.as_mut() {
                        Some(held) => held.push(kind),
                        None => {
                            streamed = true;
                            sink.emit(crate::event::Event::agent(run_id.clone(), kind))
                                .await;
                        }
                    }
                }
            };
        }

        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls: Vec<ToolCallRecord> = Vec::new();
        // The names of the calls being streamed, by call id: a step has a few.
        let mut names: Vec<(String, String)> = Vec::new();
        let mut open = OpenPart::None;
        let mut finish: Option<(FinishReason, Usage)> = None;
        // One waiter for the whole answer: making (and dropping) one per streamed delta was a
        // tenth of a run's CPU time.
        let aborted = abort.aborted();
        tokio::pin!(aborted);
        loop {
            // The next event, taken apart in this statement: a `next` or a `?` temporary kept
            // to the end of the loop's body would live across every emit in the arms below,
            // and take room of its own in the run's future.
            let event = match tokio::select! {
                biased;
                () = &mut aborted => None,
                next = stream.next() => Some(next),
            } {
                None => {
                    self.keep_partial(&message_id, &text, &reasoning).await;
                    return Err(self.aborted());
                }
                Some(None) => break,
                Some(Some(Ok(event))) => event,
                Some(Some(Err(error))) => {
                    drop(stream);
                    return Box::pin(self.model_failed(error, streamed, message_id)).await;
                }
            };
            let event = match (&stream_hooks, event) {
                (Some(pipeline), event) if !matches!(event, ModelEvent::Finish { .. }) => {
                    let mut part = Some(event);
                    let outcome = {
                        let cx = self.processor_context();
                        let step = self.state.steps.len();
                        Box::pin(pipeline.output_stream(
                            &cx,
                            step,
                            &mut part,
                            &text,
                            &mut stream_states,
                        ))
                        .await
                    };
                    match outcome {
                        Ok(decisions) => {
                            for decision in decisions {
                                out!(EventKind::ProcessorDecision(decision));
                            }
                        }
                        Err(Stopped::Tripwire(tripwire)) => {
                            drop(stream);
                            if let Some(span) = model_span.take() {
                                span.fail(tripwire.reason.clone(), Some("tripwire"));
                            }
                            self.trip(tripwire).await;
                            return Ok(());
                        }
                        Err(Stopped::Failed(failure)) => {
                            return Err(AgentError::Processor {
                                run_id: run_id.to_string(),
                                source: Box::new(failure),
                            });
                        }
                    }
                    match part {
                        Some(event) => event,
                        None => continue,
                    }
                }
                (_, event) => event,
            };
            match event {
                ModelEvent::TextDelta { text: delta } => {
                    if delta.is_empty() {
                        continue;
                    }
                    for kind in open.switch_to(OpenPart::Text, sink.is_observed(), &message_id) {
                        out!(kind);
                    }
                    text.push_str(&delta);
                    out!(EventKind::TextDelta(TextDeltaPayload {
                        id: message_id.clone(),
                        text: delta,
                    }));
                }
                ModelEvent::ReasoningDelta { text: delta } => {
                    if delta.is_empty() {
                        continue;
                    }
                    for kind in open.switch_to(OpenPart::Reasoning, sink.is_observed(), &message_id)
                    {
                        out!(kind);
                    }
                    reasoning.push_str(&delta);
                    out!(EventKind::ReasoningDelta(TextDeltaPayload {
                        id: message_id.clone(),
                        text: delta,
                    }));
                }
                ModelEvent::ToolInputStart { id, name } => {
                    for kind in open.switch_to(OpenPart::None, sink.is_observed(), &message_id) {
                        out!(kind);
                    }
                    names.push((id.clone(), name.clone()));
                    out!(EventKind::ToolCallInputStreamingStart(
                        ToolCallStreamingStartPayload {
                            tool_call_id: id,
                            tool_name: name,
                        }
                    ));
                }
                ModelEvent::ToolInputDelta { id, delta } => {
                    let tool_name = names
                        .iter()
                        .find(|(call, _)| *call == id)
                        .map(|(_, name)| name.clone())
                        .unwrap_or_default();
                    out!(EventKind::ToolCallDelta(ToolCallDeltaPayload {
                        tool_call_id: id,
                        tool_name,
                        args_text_delta: delta,
                    }));
                }
                ModelEvent::ToolInputEnd { id } => {
                    out!(EventKind::ToolCallInputStreamingEnd(ToolCallIdPayload {
                        tool_call_id: id
                    }));
                }
                ModelEvent::ToolCall { id, name, input } => {
                    for kind in open.switch_to(OpenPart::None, sink.is_observed(), &message_id) {
                        out!(kind);
                    }
                    if !names.iter().any(|(call, _)| *call == id) {
                        // The provider gave the call whole; stream it so UIs see one shape.
                        names.push((id.clone(), name.clone()));
                        if sink.is_observed() {
                            for kind in whole_input(&id, &name, &input) {
                                out!(kind);
                            }
                        }
                    }
                    let record = parse_call(id, name, input);
                    out!(EventKind::ToolCall(ToolCallPayload {
                        tool_call_id: record.tool_call_id.clone(),
                        tool_name: record.tool_name.clone(),
                        args: record.args.clone(),
                    }));
                    calls.push(record);
                }
                ModelEvent::Finish { reason, usage } => finish = Some((reason, usage)),
            }
        }
        // The model's stream may hold the request, which shares the conversation: dropped
        // first, recording the answer appends without a copy.
        drop(stream);
        // Past the stream: whether its parts were streamed no longer matters.
        for kind in open.switch_to(OpenPart::None, sink.is_observed(), &message_id) {
            match held.as_mut() {
                Some(held) => held.push(kind),
                None => {
                    sink.emit(crate::event::Event::agent(run_id.clone(), kind))
                        .await;
                }
            }
        }
        let Some((reason, usage)) = finish else {
            let error = model_error(ModelError::Protocol {
                provider: model.provider().to_string(),
                message: "the model's stream ended without a finish event".into(),
                line: None,
            });
            if let Some(span) = model_span {
                span.fail(error.to_string(), Some(error.kind()));
            }
            return Err(error);
        };
        if let Some(mut span) = model_span.take() {
            span.attribute("finishReason", super::lifecycle::finish_reason(reason));
            span.attribute_json("usage", &usage);
            span.output_json(&ModelOutput {
                text: &text,
                tool_calls: calls.iter().map(|c| c.tool_name.as_str()).collect(),
            });
            span.end();
        }
        if self
            .agent
            .inner
            .processors
            .output
            .phases()
            .intersects(Phases::of(&[
                ProcessorPhase::OutputStep,
                ProcessorPhase::OutputResult,
            ]))
        {
            let before = held.as_ref().map(|_| text.clone());
            let verdict =
                Box::pin(self.check_answer(&mut text, &reasoning, &calls, reason, usage)).await?;
            match verdict {
                Verdict::Accept => {}
                Verdict::Stop(tripwire) => {
                    // Nothing of the rejected answer was sent or is kept; its tokens count.
                    self.state.usage.add(&usage);
                    self.trip(tripwire).await;
                    return Ok(());
                }
                Verdict::Retry(tripwire) => {
                    return Box::pin(self.retry_answer(tripwire, message_id, usage)).await;
                }
            }
            if let (Some(held), Some(before)) = (held.as_mut(), before)
                && before != text
            {
                replace_held_text(held, &message_id, &text);
            }
        }
        if let Some(held) = held.take() {
            for kind in held {
                sink.emit(crate::event::Event::agent(run_id.clone(), kind))
                    .await;
            }
        }
        let has_tools = self
            .state
            .record_model_answer(text, reasoning, calls, reason, usage);
        if !has_tools {
            self.persist().await?;
            let step_text = self.state.last_text();
            emit!(
                sink,
                run_id,
                EventKind::StepFinish(StepFinishPayload {
                    message_id,
                    step_result: StepResultInfo {
                        reason,
                        is_continued: false,
                    },
                    output: StepOutput {
                        text: step_text,
                        usage,
                    },
                })
            );
        }
        Ok(())
    }

    pub(super) fn model_request(&mut self, system: Option<String>) -> ModelRequest {
        let mut head: Vec<&str> = Vec::with_capacity(1 + self.skill_system.len());
        head.extend(system.as_deref());
        head.extend(self.skill_system.iter().map(String::as_str));
        head.extend(self.state.memory_system.iter().map(String::as_str));
        // Shared with the run, not copied: see `Transcript`.
        let messages = self.state.messages.with_system(&head);
        let settings = &self.state.settings;
        let references = self
            .delegation
            .as_ref()
            .is_some_and(|d| d.options.references);
        // Without result references, delegation tools do not offer `contextFromRefs`; without
        // a thread and a resource, memory's tools are not offered.
        let tools = self.agent.inner.tool_definitions.offered(
            references,
            settings.thread_id.is_some() && settings.resource_id.is_some(),
        );
        ModelRequest {
            messages,
            tools,
            tool_choice: if self.last_turn {
                ToolChoice::None
            } else {
                settings.tool_choice.clone()
            },
            response_format: settings
                .structured_output
                .as_ref()
                .map(|s| ResponseFormat::Json {
                    schema: s.schema.clone(),
                    name: s.name.clone(),
                }),
            settings: settings.model_settings.clone(),
            abort: self.abort.clone(),
        }
    }
}

/// Which streamed part is open, so `*-start`/`*-end` events pair up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpenPart {
    None,
    Text,
    Reasoning,
}

impl OpenPart {
    /// Moves to `next`: the events that close the open part and open the next (none when
    /// nobody observes them).
    fn switch_to(&mut self, next: OpenPart, observed: bool, id: &str) -> Vec<EventKind> {
        if *self == next {
            return Vec::new();
        }
        let previous = std::mem::replace(self, next);
        if !observed {
            return Vec::new();
        }
        let payload = || PartIdPayload { id: id.to_string() };
        let mut events = Vec::with_capacity(2);
        match previous {
            OpenPart::Text => events.push(EventKind::TextEnd(payload())),
            OpenPart::Reasoning => events.push(EventKind::ReasoningEnd(payload())),
            OpenPart::None => {}
        }
        match next {
            OpenPart::Text => events.push(EventKind::TextStart(payload())),
            OpenPart::Reasoning => events.push(EventKind::ReasoningStart(payload())),
            OpenPart::None => {}
        }
        events
    }
}

/// The input events of a tool call the provider gave whole, so UIs see one shape.
fn whole_input(id: &str, name: &str, input: &str) -> [EventKind; 3] {
    [
        EventKind::ToolCallInputStreamingStart(ToolCallStreamingStartPayload {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
        }),
        EventKind::ToolCallDelta(ToolCallDeltaPayload {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
            args_text_delta: input.to_string(),
        }),
        EventKind::ToolCallInputStreamingEnd(ToolCallIdPayload {
            tool_call_id: id.to_string(),
        }),
    ]
}

/// A model call's output as its span records it: the text and the tools it called.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelOutput<'a> {
    text: &'a str,
    tool_calls: Vec<&'a str>,
}
