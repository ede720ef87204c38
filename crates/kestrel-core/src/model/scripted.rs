//! A model that replays scripted answers, for tests and benchmarks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::{
    FinishReason, LanguageModel, ModelError, ModelEvent, ModelRequest, ModelStream, Usage,
};

/// One scripted piece of an answer.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Emit this model event.
    Event(ModelEvent),
    /// Wait before the next step (an abort cuts the wait short).
    Delay(Duration),
    /// Fail the stream with this error at this point.
    Error(ModelError),
}

/// One scripted answer: what the model streams for one call.
#[derive(Debug, Clone, Default)]
pub struct ScriptedResponse {
    steps: Vec<ScriptStep>,
    /// Fail the call itself (before any event) with this error.
    fail: Option<ModelError>,
    finish: Option<(FinishReason, Usage)>,
}

impl ScriptedResponse {
    /// An answer made of explicit steps; add the finish with [`ScriptedResponse::finish`] or
    /// let it default (tool calls → `tool-calls`, otherwise `stop`).
    pub fn steps(steps: Vec<ScriptStep>) -> Self {
        Self {
            steps,
            ..Self::default()
        }
    }

    /// A text answer streamed as one delta.
    pub fn text(text: impl Into<String>) -> Self {
        Self::text_deltas([text.into()])
    }

    /// A text answer streamed as the given deltas.
    pub fn text_deltas<I, S>(deltas: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::steps(
            deltas
                .into_iter()
                .map(|d| ScriptStep::Event(ModelEvent::TextDelta { text: d.into() }))
                .collect(),
        )
    }

    /// One tool call with the given id, name and JSON arguments.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        Self::default().and_tool_call(id, name, args.to_string())
    }

    /// One tool call whose argument text is given verbatim (may be invalid JSON, for tests).
    pub fn raw_tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        input: impl Into<String>,
    ) -> Self {
        Self::default().and_tool_call(id, name, input)
    }

    /// A call that fails before streaming anything.
    pub fn error(error: ModelError) -> Self {
        Self {
            fail: Some(error),
            ..Self::default()
        }
    }

    /// Adds a tool call (streamed as start, one delta, end, call) to this answer.
    pub fn and_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: impl Into<String>,
    ) -> Self {
        let (id, name, input) = (id.into(), name.into(), input.into());
        self.steps
            .push(ScriptStep::Event(ModelEvent::ToolInputStart {
                id: id.clone(),
                name: name.clone(),
            }));
        self.steps
            .push(ScriptStep::Event(ModelEvent::ToolInputDelta {
                id: id.clone(),
                delta: input.clone(),
            }));
        self.steps.push(ScriptStep::Event(ModelEvent::ToolInputEnd {
            id: id.clone(),
        }));
        self.steps
            .push(ScriptStep::Event(ModelEvent::ToolCall { id, name, input }));
        self
    }

    /// Adds text to this answer.
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.steps.push(ScriptStep::Event(ModelEvent::TextDelta {
            text: text.into(),
        }));
        self
    }

    /// Adds reasoning to this answer.
    pub fn and_reasoning(mut self, text: impl Into<String>) -> Self {
        self.steps
            .push(ScriptStep::Event(ModelEvent::ReasoningDelta {
                text: text.into(),
            }));
        self
    }

    /// Waits `delay` before streaming anything.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        // Exactly one more: a full vector would double, and the script lives as long as the
        // model call waits.
        self.steps.reserve_exact(1);
        self.steps.insert(0, ScriptStep::Delay(delay));
        self
    }

    /// Adds a step.
    pub fn and_step(mut self, step: ScriptStep) -> Self {
        self.steps.push(step);
        self
    }

    /// Sets the finish reason and usage.
    pub fn finish(mut self, reason: FinishReason, usage: Usage) -> Self {
        self.finish = Some((reason, usage));
        self
    }

    fn finish_event(&self) -> ModelEvent {
        let (reason, usage) = self.finish.unwrap_or_else(|| {
            let mut calls = 0;
            let mut deltas = 0;
            for step in &self.steps {
                match step {
                    ScriptStep::Event(ModelEvent::ToolCall { .. }) => calls += 1,
                    ScriptStep::Event(ModelEvent::TextDelta { .. }) => deltas += 1,
                    _ => {}
                }
            }
            let reason = if calls > 0 {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            };
            (reason, Usage::new(10, calls + deltas))
        });
        ModelEvent::Finish { reason, usage }
    }

    fn into_stream(self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        if let Some(err) = self.fail {
            return Err(err);
        }
        let finish = self.finish_event();
        let has_async_steps = self.steps.iter().any(|s| matches!(s, ScriptStep::Delay(_)));
        if !has_async_steps {
            // The common case: no waits, so a plain iterator stream (no timers) is enough.
            let events = self
                .steps
                .into_iter()
                .map(|s| match s {
                    ScriptStep::Event(e) => Ok(e),
                    ScriptStep::Error(e) => Err(e),
                    ScriptStep::Delay(_) => Err(ModelError::Cancelled),
                })
                .chain(std::iter::once(Ok(finish)));
            let mut failed = false;
            let events = events.take_while(move |item| {
                let keep = !failed;
                failed |= item.is_err();
                keep
            });
            return Ok(futures::stream::iter(events).boxed());
        }
        let abort = request.abort.clone();
        let mut steps: VecDeque<ScriptStep> = self.steps.into();
        steps.push_back(ScriptStep::Event(finish));
        let stream = futures::stream::unfold(Some(steps), move |state| {
            let abort = abort.clone();
            async move {
                let mut steps = state?;
                loop {
                    match steps.pop_front()? {
                        ScriptStep::Event(e) => return Some((Ok(e), Some(steps))),
                        ScriptStep::Error(e) => return Some((Err(e), None)),
                        ScriptStep::Delay(d) => {
                            tokio::select! {
                                _ = tokio::time::sleep(d) => {}
                                _ = abort.aborted() => return Some((Err(ModelError::Cancelled), None)),
                            }
                        }
                    }
                }
            }
        });
        Ok(stream.boxed())
    }
}

type Responder = dyn Fn(&ModelRequest) -> ScriptedResponse + Send + Sync;

enum Source {
    Queue(VecDeque<ScriptedResponse>),
    Func(Arc<Responder>),
}

/// A [`LanguageModel`] that answers from a script, and records every request it receives.
///
/// ```
/// use kestrel_core::model::{ScriptedModel, ScriptedResponse};
/// use serde_json::json;
///
/// let model = ScriptedModel::new()
///     .respond(ScriptedResponse::tool_call("call-1", "add", json!({"a": 1, "b": 2})))
///     .respond(ScriptedResponse::text("1 + 2 = 3"));
/// assert_eq!(model.remaining(), 2);
/// ```
pub struct ScriptedModel {
    model_id: String,
    source: Mutex<Source>,
    record: bool,
    requests: Mutex<Vec<ModelRequest>>,
    calls: std::sync::atomic::AtomicUsize,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("model_id", &self.model_id)
            .field("calls", &self.calls())
            .finish()
    }
}

impl ScriptedModel {
    /// A model with an empty queue (`scripted/mock`).
    pub fn new() -> Self {
        Self {
            model_id: "mock".into(),
            source: Mutex::new(Source::Queue(VecDeque::new())),
            record: true,
            requests: Mutex::new(Vec::new()),
            calls: 0.into(),
        }
    }

    /// A model that computes each answer from the request, e.g. a tool call on the first step
    /// and text once a tool result is present. Useful when many runs share one model.
    pub fn from_fn(f: impl Fn(&ModelRequest) -> ScriptedResponse + Send + Sync + 'static) -> Self {
        let model = Self::new();
        *model.lock_source() = Source::Func(Arc::new(f));
        model
    }

    /// Sets the model id reported by [`LanguageModel::model_id`].
    pub fn with_model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = id.into();
        self
    }

    /// Turns request recording off (for benchmarks with many calls).
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// Queues an answer for the next call.
    pub fn respond(self, response: ScriptedResponse) -> Self {
        self.push(response);
        self
    }

    /// Queues an answer (through a shared reference).
    pub fn push(&self, response: ScriptedResponse) {
        if let Source::Queue(q) = &mut *self.lock_source() {
            q.push_back(response);
        }
    }

    /// How many queued answers are left.
    pub fn remaining(&self) -> usize {
        match &*self.lock_source() {
            Source::Queue(q) => q.len(),
            Source::Func(_) => usize::MAX,
        }
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn lock_source(&self) -> std::sync::MutexGuard<'_, Source> {
        self.source.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_response(
        &self,
        request: &ModelRequest,
        call: usize,
    ) -> Result<ScriptedResponse, ModelError> {
        let responder = match &mut *self.lock_source() {
            Source::Queue(q) => {
                return q.pop_front().ok_or_else(|| {
                    ModelError::Scripted(format!(
                        "ScriptedModel has no response queued for call #{}",
                        call + 1
                    ))
                });
            }
            Source::Func(f) => f.clone(),
        };
        // Called without the lock held, so the responder may push to this model.
        Ok(responder(request))
    }
}

#[async_trait::async_trait]
impl LanguageModel for ScriptedModel {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let call = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let response = self.next_response(&request, call)?;
        let stream = response.into_stream(&request);
        if self.record {
            self.requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(request);
        }
        stream
    }
}
