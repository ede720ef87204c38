//! The engine's generation as model events: text and tool-call deltas, the finish reason,
//! usage, and errors as [`ModelError`]s.

use std::collections::HashMap;

use futures::StreamExt;
use kestrel_llama::{GenerateError, Generation, GenerationEvent, StopReason};

use super::PROVIDER;
use crate::abort::AbortSignal;
use crate::model::{FinishReason, ModelError, ModelEvent, ModelStream, Usage};

pub(super) fn generate_error(error: GenerateError) -> ModelError {
    match error {
        GenerateError::Cancelled => ModelError::Cancelled,
        GenerateError::ContextOverflow {
            prompt_tokens,
            context,
        } => ModelError::ContextOverflow {
            provider: PROVIDER.into(),
            prompt_tokens: u64::from(prompt_tokens),
            context: u64::from(context),
        },
        error @ (GenerateError::UnsupportedSchema { .. }
        | GenerateError::InvalidSchema { .. }
        | GenerateError::Grammar(_)
        | GenerateError::InvalidRequest(_)) => ModelError::InvalidRequest {
            provider: PROVIDER.into(),
            message: error.to_string(),
        },
        other => ModelError::Other {
            provider: PROVIDER.into(),
            message: other.to_string(),
        },
    }
}

pub(super) fn finish_reason(reason: StopReason) -> FinishReason {
    match reason {
        StopReason::EndOfTurn | StopReason::StopSequence => FinishReason::Stop,
        StopReason::ToolCalls => FinishReason::ToolCalls,
        StopReason::MaxTokens | StopReason::ContextFull | StopReason::Repetition => {
            FinishReason::Length
        }
    }
}

/// State of the event stream.
pub(super) struct Events {
    generation: Generation,
    abort: AbortSignal,
    /// Call ids by the engine's call index.
    ids: HashMap<usize, String>,
    /// Events converted but not yet yielded (one engine event can give two model events).
    queue: std::collections::VecDeque<ModelEvent>,
    done: bool,
}

impl Events {
    fn id(&mut self, index: usize) -> String {
        self.ids
            .entry(index)
            .or_insert_with(|| format!("call_{}", uuid::Uuid::new_v4().simple()))
            .clone()
    }

    /// Converts one engine event.
    fn convert(&mut self, event: GenerationEvent) {
        match event {
            GenerationEvent::Text(text) => self.queue.push_back(ModelEvent::TextDelta { text }),
            GenerationEvent::ToolCallStart { index, name } => {
                let id = self.id(index);
                self.queue
                    .push_back(ModelEvent::ToolInputStart { id, name });
            }
            GenerationEvent::ToolCallDelta { index, delta } => {
                let id = self.id(index);
                self.queue
                    .push_back(ModelEvent::ToolInputDelta { id, delta });
            }
            GenerationEvent::ToolCallEnd {
                index,
                name,
                arguments,
            } => {
                let id = self.id(index);
                self.queue
                    .push_back(ModelEvent::ToolInputEnd { id: id.clone() });
                self.queue.push_back(ModelEvent::ToolCall {
                    id,
                    name,
                    input: arguments,
                });
            }
            GenerationEvent::Finished(completion) => {
                let mut usage = Usage::new(
                    u64::from(completion.prompt_tokens),
                    u64::from(completion.completion_tokens),
                );
                // The prompt prefix the engine's KV cache already held, as a hosted provider
                // reports its prompt-cache hits.
                usage.cached_input_tokens = (completion.cached_prompt_tokens > 0)
                    .then_some(u64::from(completion.cached_prompt_tokens));
                self.queue.push_back(ModelEvent::Finish {
                    reason: finish_reason(completion.reason),
                    usage,
                });
                self.done = true;
            }
        }
    }
}

/// The model event stream of one generation. It ends after `Finish`, after an error, or with
/// [`ModelError::Cancelled`] as soon as the abort signal fires (the engine stops before its
/// next token). Dropping it cancels the generation.
pub(super) fn event_stream(generation: Generation, abort: AbortSignal) -> ModelStream {
    let state = Events {
        generation,
        abort,
        ids: HashMap::new(),
        queue: Default::default(),
        done: false,
    };
    futures::stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((Ok(event), Some(state)));
            }
            if state.done {
                return None;
            }
            let next = tokio::select! {
                biased;
                _ = state.abort.aborted() => {
                    state.generation.cancel();
                    return Some((Err(ModelError::Cancelled), None));
                }
                next = state.generation.next() => next,
            };
            match next {
                Some(Ok(event)) => state.convert(event),
                Some(Err(error)) => return Some((Err(generate_error(error)), None)),
                None => {
                    return Some((
                        Err(ModelError::Other {
                            provider: PROVIDER.into(),
                            message: "the local engine stopped without finishing".into(),
                        }),
                        None,
                    ));
                }
            }
        }
    })
    .boxed()
}
