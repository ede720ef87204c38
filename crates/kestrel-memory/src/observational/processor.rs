//! The observational memory stage of a [`Memory`](crate::Memory): what a run's context gets
//! from the observations, and the background observation and reflection after each run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use kestrel_core::agent::GenerateResult;
use kestrel_core::memory::{MemoryError, MemoryScope};
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ModelRegistry, ModelRequest, ModelSpec, SharedModel, generate};
use kestrel_core::tool::SharedTool;
use kestrel_core::trace::{ActiveSpan, SpanParent, SpanType};
use kestrel_storage::{
    Anchor, NewObservation, Observation, Scope, Selection, SeqRange, Storage, StoredMessage,
};

use super::parse::{ObservationLine, Parsed, parse_observations};
use super::render::{context_text, cut, render_observation, transcript_message};
use super::{
    Bump, OBSERVER_INSTRUCTIONS, ObservationProgress, ObservationScope, ObservationalMemory,
    REFLECTOR_INSTRUCTIONS,
};
use crate::error::{Error, MemoryBuildError};
use crate::processor::{MemoryProcessor, RecallContext, StoreContext};
use crate::recall_tool::RecallTool;
use crate::slot::StoreSlot;
use crate::tokens::{count_tokens, stored_message_tokens};

/// At most this many unobserved messages are loaded into a run's context (more only accumulate
/// when the observer keeps failing; the newest are kept).
const MAX_UNOBSERVED_MESSAGES: u32 = 1000;

/// At most this many unobserved messages are read per observation batch load.
const OBSERVE_LOAD: u32 = 500;

/// At most this many observer calls after one run; the rest waits for the next run.
const MAX_OBSERVER_CALLS_PER_RUN: usize = 20;

/// Observer batches hold up to `message_tokens` tokens, and never fewer than this: a small
/// threshold should not cost one observer call per message.
const MIN_BATCH_TOKENS: usize = 8000;

/// How many tokens of the latest observations the observer sees as context.
const PREVIOUS_OBSERVATION_TOKENS: usize = 2000;

/// The observational memory stage of a [`Memory`](crate::Memory), and its `recall` tool.
pub(crate) struct ObservationalProcessor {
    storage: StoreSlot,
    observer: SharedModel,
    reflector: SharedModel,
    scope: ObservationScope,
    message_tokens: usize,
    observation_tokens: usize,
    timeout: Duration,
    progress: ObservationProgress,
    tool: Option<SharedTool>,
    /// One lock per observation log (thread or resource), so observations never race.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ObservationalProcessor {
    pub(crate) fn new(
        storage: StoreSlot,
        options: ObservationalMemory,
        registry: Option<&ModelRegistry>,
    ) -> Result<Self, MemoryBuildError> {
        let resolve = |spec: &ModelSpec| match spec {
            ModelSpec::Model(model) => Ok(model.clone()),
            ModelSpec::Id(_) => spec
                .resolve(&registry.cloned().unwrap_or_else(ModelRegistry::from_env))
                .map_err(|source| MemoryBuildError::ObservationalModel { source }),
        };
        let observer = resolve(&options.model)?;
        let reflector = match &options.reflector {
            Some(spec) => resolve(spec)?,
            None => observer.clone(),
        };
        let tool: Option<SharedTool> = options
            .recall_tool
            .then(|| Arc::new(RecallTool::new(storage.clone(), options.scope)) as SharedTool);
        Ok(Self {
            storage,
            observer,
            reflector,
            scope: options.scope,
            message_tokens: options.message_tokens,
            observation_tokens: options.observation_tokens,
            timeout: options.timeout,
            progress: options.progress,
            tool,
            locks: Mutex::new(HashMap::new()),
        })
    }

    /// The memory's store, or why there is none.
    fn store(&self) -> Result<&Arc<dyn Storage>, String> {
        self.storage.require().map_err(|error| error.to_string())
    }

    /// Where this thread's observations are kept.
    fn log_scope(&self, scope: &MemoryScope) -> Scope {
        match self.scope {
            ObservationScope::Thread => Scope::thread(&scope.thread_id, &scope.resource_id),
            ObservationScope::Resource => Scope::resource(&scope.resource_id),
        }
    }

    fn lock_for(&self, log: &Scope) -> Arc<tokio::sync::Mutex<()>> {
        let key = match log {
            Scope::Thread { thread_id, .. } => format!("thread:{thread_id}"),
            Scope::Resource { resource_id } => format!("resource:{resource_id}"),
        };
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(locks.entry(key).or_default())
    }

    /// Observes the thread's unobserved messages past the threshold, then reflects past the
    /// observation threshold.
    async fn observe(&self, scope: &MemoryScope) -> Result<(), String> {
        let log = self.log_scope(scope);
        let lock = self.lock_for(&log);
        let _guard = lock.lock().await;
        let (thread_id, resource_id) = (scope.thread_id.as_str(), scope.resource_id.as_str());
        let storage = self.store()?;
        let mut observed = storage
            .get_observed_seq(thread_id, resource_id)
            .await
            .map_err(|e| format!("reading the observed seq failed: {e}"))?;
        let mut existing: Option<Vec<Observation>> = None;
        let mut calls = 0;
        let mut past_threshold = false;
        'load: loop {
            let selection = Selection::Range(SeqRange {
                after: observed,
                limit: Some(OBSERVE_LOAD),
                ..SeqRange::default()
            });
            let list = storage
                .list_messages(thread_id, Some(resource_id), selection)
                .await
                .map_err(|e| format!("reading unobserved messages failed: {e}"))?;
            if list.messages.is_empty() {
                break;
            }
            let (messages, counts) = count_blocking(list.messages).await?;
            let total: usize = counts.iter().sum();
            if !past_threshold && !list.has_more && total < self.message_tokens {
                break;
            }
            past_threshold = true;
            if existing.is_none() {
                existing = Some(
                    storage
                        .list_observations(&log)
                        .await
                        .map_err(|e| format!("reading observations failed: {e}"))?,
                );
            }
            let budget = self.message_tokens.max(MIN_BATCH_TOKENS);
            for batch in batches(&messages, &counts, budget) {
                if calls >= MAX_OBSERVER_CALLS_PER_RUN {
                    tracing::info!(
                        thread_id,
                        "observational memory: observer call limit reached; the rest is observed after the next run"
                    );
                    break 'load;
                }
                calls += 1;
                let Some(last) = batch.last() else { continue };
                let previous = existing.as_deref().unwrap_or_default();
                let mut span = operation_span("observe");
                if let Some(span) = &mut span {
                    span.attribute("messages", batch.len());
                    span.attribute("observedFromSeq", batch.first().map_or(0, |m| m.seq));
                    span.attribute("observedToSeq", last.seq);
                }
                let lines = match self.observe_batch(batch, previous, span.as_ref()).await {
                    Ok(lines) => lines,
                    Err(error) => {
                        if let Some(span) = span {
                            span.fail(error.clone(), Some("memory"));
                        }
                        return Err(error);
                    }
                };
                if let Some(mut span) = span {
                    span.attribute("observations", lines.len());
                    span.output(
                        lines
                            .iter()
                            .map(|line| line.text.as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                    );
                    span.end();
                }
                let fallback = last.created_at;
                let new: Vec<NewObservation> = lines
                    .into_iter()
                    .map(|line| NewObservation {
                        id: None,
                        text: line.text,
                        created_at: Some(line.at.unwrap_or(fallback)),
                        observed_up_to_seq: Some(last.seq),
                        source_thread_id: Some(thread_id.to_owned()),
                    })
                    .collect();
                if !new.is_empty() {
                    let added = storage
                        .add_observations(&log, new)
                        .await
                        .map_err(|e| format!("storing observations failed: {e}"))?;
                    existing.get_or_insert_with(Vec::new).extend(added);
                }
                storage
                    .set_observed_seq(thread_id, resource_id, last.seq)
                    .await
                    .map_err(|e| format!("storing the observed seq failed: {e}"))?;
                observed = Some(last.seq);
                tracing::debug!(
                    thread_id,
                    observed_up_to = last.seq,
                    "observational memory: messages observed"
                );
            }
            if !list.has_more {
                break;
            }
        }
        self.reflect(scope, &log, existing).await
    }

    /// Asks the observer about one batch of messages.
    async fn observe_batch(
        &self,
        batch: &[StoredMessage],
        previous: &[Observation],
        span: Option<&ActiveSpan>,
    ) -> Result<Vec<ObservationLine>, String> {
        let max_message_chars = self.message_tokens.saturating_mul(4).max(4000);
        let mut data = String::from("<previous_observations>\n");
        for observation in latest_within(previous, PREVIOUS_OBSERVATION_TOKENS) {
            data.push_str(&render_observation(observation, self.scope, None));
            data.push('\n');
        }
        data.push_str("</previous_observations>\n\n<transcript>\n");
        for message in batch {
            transcript_message(&mut data, message, max_message_chars);
        }
        data.push_str("</transcript>");
        let request = ModelRequest {
            messages: vec![Message::system(OBSERVER_INSTRUCTIONS), Message::user(data)].into(),
            ..ModelRequest::default()
        };
        let answer = self.ask(&self.observer, request, "observer", span).await?;
        match parse_observations(&answer) {
            Parsed::Nothing => Ok(Vec::new()),
            Parsed::Lines(lines) if !lines.is_empty() => Ok(lines),
            Parsed::Lines(_) => Err(format!(
                "the observer's answer holds no observation line: {:?}",
                cut(&answer, 200)
            )),
        }
    }

    /// Rewrites the observations when they pass the threshold.
    async fn reflect(
        &self,
        scope: &MemoryScope,
        log: &Scope,
        known: Option<Vec<Observation>>,
    ) -> Result<(), String> {
        let observations = match known {
            Some(observations) => observations,
            None => self
                .store()?
                .list_observations(log)
                .await
                .map_err(|e| format!("reading observations failed: {e}"))?,
        };
        if observations.is_empty() {
            return Ok(());
        }
        let rendered: Vec<String> = observations
            .iter()
            .map(|o| render_observation(o, self.scope, None))
            .collect();
        let (rendered, before) = count_lines_blocking(rendered).await?;
        if before < self.observation_tokens {
            return Ok(());
        }
        let mut span = operation_span("reflect");
        if let Some(span) = &mut span {
            span.attribute("observations", observations.len());
            span.attribute("tokensBefore", before);
        }
        let reflected = self
            .reflect_now(scope, log, &observations, &rendered, before, span.as_ref())
            .await;
        if let Some(mut span) = span {
            match &reflected {
                Ok(after) => {
                    span.attribute("tokensAfter", *after);
                    span.end();
                }
                Err(error) => span.fail(error.clone(), Some("memory")),
            }
        }
        reflected.map(|_| ())
    }

    /// Asks the reflector for a shorter log, and keeps it; the new log's tokens.
    async fn reflect_now(
        &self,
        scope: &MemoryScope,
        log: &Scope,
        observations: &[Observation],
        rendered: &[String],
        before: usize,
        span: Option<&ActiveSpan>,
    ) -> Result<usize, String> {
        let target = self.observation_tokens / 2;
        let instructions = format!(
            "{REFLECTOR_INSTRUCTIONS} Keep the new log under about {target} tokens (it has \
             {before} now)."
        );
        let mut data = String::from("<observations>\n");
        for line in rendered {
            data.push_str(line);
            data.push('\n');
        }
        data.push_str("</observations>");
        let request = ModelRequest {
            messages: vec![Message::system(instructions), Message::user(data)].into(),
            ..ModelRequest::default()
        };
        let answer = self
            .ask(&self.reflector, request, "reflector", span)
            .await?;
        let lines = match parse_observations(&answer) {
            Parsed::Lines(lines) if !lines.is_empty() => lines,
            _ => {
                return Err(format!(
                    "the reflector's answer holds no observation line: {:?}",
                    cut(&answer, 200)
                ));
            }
        };
        let after: usize = lines.iter().map(|l| count_tokens(&l.text)).sum();
        if after >= before {
            return Err(format!(
                "the reflector's log ({after} tokens) is no shorter than the observations \
                 ({before} tokens); they are kept"
            ));
        }
        let newest = observations
            .iter()
            .map(|o| o.created_at)
            .max()
            .unwrap_or_else(Utc::now);
        let up_to = observations
            .iter()
            .filter_map(|o| o.observed_up_to_seq)
            .max();
        let source = match self.scope {
            ObservationScope::Thread => Some(scope.thread_id.clone()),
            ObservationScope::Resource => None,
        };
        let replacement = lines
            .into_iter()
            .map(|line| NewObservation {
                id: None,
                text: line.text,
                created_at: Some(line.at.unwrap_or(newest)),
                observed_up_to_seq: up_to,
                source_thread_id: source.clone(),
            })
            .collect();
        self.store()?
            .replace_observations(log, replacement)
            .await
            .map_err(|e| format!("storing the reflected observations failed: {e}"))?;
        tracing::debug!(
            thread_id = %scope.thread_id,
            before,
            after,
            "observational memory: observations reflected"
        );
        Ok(after)
    }

    /// One observer or reflector call, with the timeout.
    /// Traced (under `span`) as a `model_generation` span.
    async fn ask(
        &self,
        model: &SharedModel,
        request: ModelRequest,
        who: &str,
        span: Option<&ActiveSpan>,
    ) -> Result<String, String> {
        let mut call = span.and_then(|span| {
            let mut call = span.child(
                SpanType::ModelGeneration,
                format!("llm: '{}'", model.model_id()),
            )?;
            call.attribute("model", model.model_id());
            call.attribute("provider", model.provider());
            call.attribute("role", who);
            Some(call)
        });
        let response = tokio::time::timeout(self.timeout, generate(model.as_ref(), request))
            .await
            .map_err(|_| format!("the {who} gave no answer within {:?}", self.timeout))
            .and_then(|answer| answer.map_err(|e| format!("the {who} failed: {e}")));
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                if let Some(call) = call {
                    call.fail(error.clone(), Some("model"));
                }
                return Err(error);
            }
        };
        if let Some(mut call) = call.take() {
            if let Ok(usage) = serde_json::to_value(response.usage) {
                call.attribute("usage", usage);
            }
            call.output(response.text.clone());
            call.end();
        }
        Ok(response.text)
    }
}

#[async_trait]
impl MemoryProcessor for ObservationalProcessor {
    fn name(&self) -> &str {
        "observational-memory"
    }

    async fn recall(&self, cx: &mut RecallContext<'_>) -> Result<(), MemoryError> {
        let (thread_id, resource_id) = (cx.scope.thread_id.as_str(), cx.scope.resource_id.as_str());
        let storage_error =
            |action, e| MemoryError::from(Error::storage(action, thread_id, resource_id, e));
        let log = self.log_scope(cx.scope);
        // The observed seq first: the observer adds observations before it moves the seq, so a
        // concurrent observation can at worst show a message twice (in full and observed), never
        // lose one.
        let observed = if cx.thread_exists {
            cx.storage
                .get_observed_seq(thread_id, resource_id)
                .await
                .map_err(|e| storage_error("load the observed seq", e))?
        } else {
            None
        };
        let observations = if cx.thread_exists || self.scope == ObservationScope::Resource {
            cx.storage
                .list_observations(&log)
                .await
                .map_err(|e| storage_error("load observations", e))?
        } else {
            Vec::new()
        };
        // Every unobserved message stays in full: load those older than the window.
        let first_in_window = cx.history.first().map(|m| m.seq);
        let gap = match (observed, first_in_window) {
            (Some(seq), Some(first)) => first > seq.saturating_add(1),
            _ => true,
        };
        if cx.thread_exists && cx.has_older && gap {
            let selection = Selection::Range(SeqRange {
                after: observed,
                before: first_in_window,
                limit: Some(MAX_UNOBSERVED_MESSAGES),
                anchor: Anchor::End,
            });
            let list = cx
                .storage
                .list_messages(thread_id, Some(resource_id), selection)
                .await
                .map_err(|e| storage_error("load unobserved messages", e))?;
            if list.has_more {
                tracing::warn!(
                    thread_id,
                    "observational memory: more than {MAX_UNOBSERVED_MESSAGES} unobserved messages; \
                     only the newest are in the context (is the observer failing?)"
                );
            }
            let mut unobserved = list.messages;
            if first_in_window.is_none() {
                // No window (`last_messages(0)`): nothing from the input on.
                if let Some(at) = unobserved
                    .iter()
                    .position(|m| cx.input.iter().any(|i| i.id == m.id))
                {
                    unobserved.truncate(at);
                }
            }
            cx.add_history(unobserved);
        }
        if !observations.is_empty() {
            cx.system.push(context_text(
                &observations,
                self.scope,
                thread_id,
                observed,
                self.tool.is_some(),
            ));
        }
        Ok(())
    }

    async fn run_finished(&self, cx: &StoreContext<'_>, _result: &GenerateResult) {
        let _bump = Bump(&self.progress);
        if let Err(error) = self.observe(cx.scope).await {
            tracing::warn!(
                thread_id = %cx.scope.thread_id,
                %error,
                "observational memory: observing failed; it is tried again after the next run"
            );
        }
    }

    fn tools(&self) -> Vec<SharedTool> {
        self.tool.iter().cloned().collect()
    }
}

/// A `memory_operation` span (`memory: 'observe'`, `memory: 'reflect'`) under the span the
/// run's after-run work hangs under, when the instance traces.
fn operation_span(operation: &str) -> Option<ActiveSpan> {
    let mut span = SpanParent::current()?
        .start(SpanType::MemoryOperation, format!("memory: '{operation}'"))?;
    span.attribute("operation", operation);
    Some(span)
}

/// Counts messages' tokens off the async workers (tokenizing is CPU work).
async fn count_blocking(
    messages: Vec<StoredMessage>,
) -> Result<(Vec<StoredMessage>, Vec<usize>), String> {
    tokio::task::spawn_blocking(move || {
        let counts = messages.iter().map(stored_message_tokens).collect();
        (messages, counts)
    })
    .await
    .map_err(|e| format!("counting tokens failed: {e}"))
}

/// Counts lines' tokens off the async workers; returns the lines and their total.
async fn count_lines_blocking(lines: Vec<String>) -> Result<(Vec<String>, usize), String> {
    tokio::task::spawn_blocking(move || {
        let total = lines.iter().map(|l| count_tokens(l)).sum();
        (lines, total)
    })
    .await
    .map_err(|e| format!("counting tokens failed: {e}"))
}

/// Splits messages into observer batches of at most `budget` tokens (a larger message is a batch
/// of its own). A batch never ends just before tool results, which stay with their call.
pub(super) fn batches<'a>(
    messages: &'a [StoredMessage],
    counts: &[usize],
    budget: usize,
) -> Vec<&'a [StoredMessage]> {
    let mut out = Vec::new();
    let (mut start, mut tokens) = (0, 0);
    for (i, (message, count)) in messages.iter().zip(counts).enumerate() {
        if i > start && tokens + count > budget && message.role != Role::Tool {
            out.push(&messages[start..i]);
            (start, tokens) = (i, 0);
        }
        tokens += count;
    }
    if start < messages.len() {
        out.push(&messages[start..]);
    }
    out
}

/// The latest observations whose rendering fits in `budget` tokens, oldest first.
fn latest_within(observations: &[Observation], budget: usize) -> &[Observation] {
    let mut used = 0;
    let mut start = observations.len();
    for (i, observation) in observations.iter().enumerate().rev() {
        used += count_tokens(&observation.text) + 8;
        if used > budget {
            break;
        }
        start = i;
    }
    &observations[start..]
}
