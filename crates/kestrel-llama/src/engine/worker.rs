//! The worker thread: owns the only llama.cpp context and serves queued requests one at a
//! time, from prompt evaluation to the last event.

use std::num::NonZeroU32;
use std::sync::mpsc;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc::UnboundedSender;

use super::sampling::{
    accepts, constrained_argmax, constrained_candidates, elapsed_micros, log_softmax_at,
    sampling_chain, to_pos,
};
use super::{CallFormat, EventResult, Job, Model, ModelInfo};
use crate::error::{GenerateError, LoadError};
use crate::grammar::{self, Answer, Plan};
use crate::output::OutputRouter;
use crate::request::{CancelToken, Completion, GenerationEvent, StopReason};
use crate::text::Utf8Decoder;

pub(super) fn worker_main(
    backend: &'static LlamaBackend,
    model: &Model,
    info: &ModelInfo,
    batch_size: u32,
    prompt_cache: bool,
    queue: mpsc::Receiver<Job>,
    ready: mpsc::SyncSender<Result<(), LoadError>>,
) {
    let threads = i32::try_from(info.threads).unwrap_or(1);
    let n_batch = batch_size.min(info.context_size);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(info.context_size))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let context = match model.model.new_context(backend, params) {
        Ok(context) => context,
        Err(e) => {
            let _ = ready.send(Err(LoadError::Context {
                path: info.path.clone(),
                context_size: info.context_size,
                message: e.to_string(),
            }));
            return;
        }
    };
    let mut worker = Worker {
        model,
        context,
        batch: LlamaBatch::new(n_batch as usize, 1),
        n_ctx: info.context_size,
        n_batch: n_batch as usize,
        cached: Vec::new(),
        prompt_cache,
        call_prefix: CallFormat::Own.call_prefix(),
        can_cut: !model.model.is_recurrent() && !model.model.is_hybrid(),
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    drop(ready);
    // Ends when every `Engine` clone is dropped.
    while let Ok(job) = queue.recv() {
        let events = job.events.clone();
        // A panic inside a request (a bug, here or in the bindings) fails that request only;
        // the next one starts from a cleared KV cache.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run(job, &events)))
                .unwrap_or_else(|panic| {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    Err(GenerateError::Internal(message))
                });
        if let Err(error) = result {
            // The cache may hold anything a failed request left: trust none of it.
            worker.forget_cache();
            let _ = events.send(Err(error));
        }
    }
}

struct Worker<'m> {
    model: &'m Model,
    context: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    n_ctx: u32,
    n_batch: usize,
    /// The tokens whose keys and values the KV cache holds, at positions `0..len`: what the
    /// last request evaluated (its prompt and the tokens it generated). The next request
    /// evaluates only what follows the prefix it shares with them.
    cached: Vec<LlamaToken>,
    /// Whether a request reuses what the one before left (`EngineOptions::prompt_cache`).
    prompt_cache: bool,
    /// Whether the model's state can be cut back to a prefix (not for recurrent or hybrid
    /// models, whose state is not per position).
    can_cut: bool,
    /// The text a forced call of the current request starts with, up to the tool's name (in
    /// the format its prompt shows).
    call_prefix: &'static str,
}

/// The samplers of one request.
struct Samplers {
    /// Temperature / top-p / final selection (greedy or seeded).
    chain: LlamaSampler,
    /// The same with the request's repeat penalty first, for free text.
    text_chain: Option<LlamaSampler>,
    /// The grammar, while output is constrained.
    grammar: Option<LlamaSampler>,
}

/// Output state of one request: turns tokens into events and sends them.
struct Emitter<'a> {
    router: OutputRouter,
    decoder: Utf8Decoder,
    piece: Vec<u8>,
    out: Vec<GenerationEvent>,
    events: &'a UnboundedSender<EventResult>,
    /// Tokens generated (forced ones included).
    generated: u32,
    /// The free-text answer's trailing run of blank tokens.
    blanks: BlankRun,
    /// Whether the output is going round in a loop.
    repeats: LoopGuard,
}

/// The most tokens in a row a free-text answer may spend on nothing visible (whitespace, or
/// control tokens that are not the end of the turn and render as nothing): past it the answer
/// ends. Small models sometimes never close their turn and write blanks until the context is
/// full (SmolLM2-135M did, 2,720 tokens of them, on two of the decision set's prompts); no
/// answer a person reads has this many blank tokens in a row.
pub(crate) const MAX_BLANK_TOKENS: u32 = 64;

/// Counts the tokens in a row whose text is only whitespace.
#[derive(Debug, Default)]
struct BlankRun(u32);

impl BlankRun {
    /// Counts a token from its piece (its bytes: none for a control token) and the text it
    /// completed (empty with a piece: a character still incomplete, which neither counts nor
    /// breaks the run); whether the run has reached [`MAX_BLANK_TOKENS`].
    fn push(&mut self, piece: &[u8], text: &str) -> bool {
        if text.is_empty() && !piece.is_empty() {
            return false;
        }
        if text.chars().all(char::is_whitespace) {
            self.0 += 1;
        } else {
            self.0 = 0;
        }
        self.0 >= MAX_BLANK_TOKENS
    }
}

/// The longest loop [`LoopGuard`] looks for, in tokens.
const MAX_LOOP_PERIOD: usize = 32;

/// Tokens in a row that repeat the tokens one period earlier (for some period of at most
/// [`MAX_LOOP_PERIOD`]) before the output is cut as a loop. A stretch of up to 32 tokens said
/// over and over for 256 tokens is no answer and no tool argument; at SmolLM2's speed here it
/// is 2 seconds, against the minute a loop took to fill the context.
pub(crate) const MAX_LOOP_TOKENS: u32 = 256;

/// Detects output going round in a loop: for each period up to [`MAX_LOOP_PERIOD`], how many
/// tokens in a row equal the token that period before them.
#[derive(Debug)]
struct LoopGuard {
    /// The last tokens, as a ring.
    recent: [i32; MAX_LOOP_PERIOD],
    seen: usize,
    /// `runs[p - 1]`: the run of tokens equal to the one `p` before.
    runs: [u32; MAX_LOOP_PERIOD],
}

impl Default for LoopGuard {
    fn default() -> Self {
        Self {
            recent: [0; MAX_LOOP_PERIOD],
            seen: 0,
            runs: [0; MAX_LOOP_PERIOD],
        }
    }
}

impl LoopGuard {
    /// Counts `token`; whether the output has looped for [`MAX_LOOP_TOKENS`].
    fn push(&mut self, token: i32) -> bool {
        let mut looped = false;
        for period in 1..=MAX_LOOP_PERIOD.min(self.seen) {
            let earlier = self.recent[(self.seen - period) % MAX_LOOP_PERIOD];
            let run = &mut self.runs[period - 1];
            *run = if earlier == token { *run + 1 } else { 0 };
            looped |= *run >= MAX_LOOP_TOKENS;
        }
        self.recent[self.seen % MAX_LOOP_PERIOD] = token;
        self.seen += 1;
        looped
    }
}

impl Emitter<'_> {
    /// Consumes one generated token; returns `Some(reason)` when the output is complete.
    fn token(
        &mut self,
        vocab: &llama_cpp_2::vocab::LlamaVocab<'_>,
        token: LlamaToken,
    ) -> Result<Option<StopReason>, GenerateError> {
        self.generated += 1;
        self.piece.clear();
        vocab.token_to_piece_into(token, &mut self.piece, false, None);
        let text = self.decoder.push(&self.piece);
        let mut done = self.router.push(&text, &mut self.out);
        // Blanks end a free-text answer, or an output that has shown nothing yet.
        let textual = self.router.is_free_text() || self.router.is_undecided();
        if done.is_none() && textual && self.blanks.push(&self.piece, &text) {
            done = Some(StopReason::EndOfTurn);
        }
        if done.is_none() && self.repeats.push(token.0) {
            done = Some(StopReason::Repetition);
        }
        self.send()?;
        Ok(done)
    }

    fn send(&mut self) -> Result<(), GenerateError> {
        for event in self.out.drain(..) {
            if self.events.send(Ok(event)).is_err() {
                // The receiver is gone: nobody wants the rest.
                return Err(GenerateError::Cancelled);
            }
        }
        Ok(())
    }

    /// Flushes held-back text and sends `Finished`.
    fn finish(&mut self, completion: Completion) {
        // An incomplete UTF-8 sequence at the very end becomes U+FFFD.
        let rest = self.decoder.finish();
        let _ = self.router.push(&rest, &mut self.out);
        self.router.finish(&mut self.out);
        self.out.push(GenerationEvent::Finished(completion));
        let _ = self.send();
    }
}

/// What [`Worker::force_call_start`] did.
enum Forced {
    /// Nothing: generation goes on under the plan's grammar.
    Nothing,
    /// It wrote the call's start and name; the next logits are at this batch index.
    Call(i32),
    /// The model replies directly; the logits at the end of the prompt are at this index.
    Reply(i32),
}

impl Worker<'_> {
    fn run(
        &mut self,
        job: Job,
        events: &UnboundedSender<EventResult>,
    ) -> Result<(), GenerateError> {
        let Job {
            request,
            plan,
            grammar,
            reply_grammar,
            ..
        } = job;
        let plan = &plan;
        let cancel = &request.cancel;
        if cancel.is_cancelled() || events.is_closed() {
            return Err(GenerateError::Cancelled);
        }
        let (tokens, format) = self.model.prompt_tokens(&request, plan);
        self.call_prefix = format.call_prefix();
        let prompt_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
        if prompt_tokens >= self.n_ctx {
            return Err(GenerateError::ContextOverflow {
                prompt_tokens,
                context: self.n_ctx,
            });
        }
        let mut samplers = Samplers {
            chain: sampling_chain(&request, None),
            text_chain: request
                .repeat_penalty
                .filter(|p| p.penalty != 1.0)
                .map(|p| sampling_chain(&request, Some((p, self.model.model.n_vocab())))),
            grammar,
        };
        let vocab = self.model.model.vocab();
        let max_tokens = request.max_tokens.unwrap_or(u32::MAX);
        let greedy = request.temperature.unwrap_or(0.0) <= 0.0;
        let mut emitter = Emitter {
            router: OutputRouter::new(plan.calls(), plan.answer, &request.stop),
            decoder: Utf8Decoder::default(),
            piece: Vec::with_capacity(32),
            out: Vec::new(),
            events,
            generated: 0,
            blanks: BlankRun::default(),
            repeats: LoopGuard::default(),
        };

        // A choice between calls and a direct reply is calibrated against a content-free
        // version of the prompt (see `content_free_tokens`), which shares everything before the
        // last user message: that part is evaluated once for both.
        let calibrating = plan.answer == Answer::None
            && plan.reply.is_some()
            && tokens.len() + 64 < self.n_ctx as usize
            && max_tokens >= 32
            && !self.model.model.is_recurrent()
            && !self.model.model.is_hybrid();
        let content_free = if calibrating {
            self.model
                .content_free_tokens(&request, plan, grammar::CALIBRATION_TEXT)
                .filter(|cf| cf.len() + 64 < self.n_ctx as usize)
        } else {
            None
        };
        let shared = content_free.as_ref().map_or(tokens.len(), |cf| {
            let common = tokens.iter().zip(cf).take_while(|(a, b)| a == b).count();
            // At least the last token of each is evaluated on its own, for its logits.
            common
                .min(tokens.len().saturating_sub(1))
                .min(cf.len().saturating_sub(1))
        });

        // Prompt: what the KV cache already holds of it (an agent's next step, a conversation's
        // next turn) is not evaluated again; the last token always is, for its logits.
        let started = Instant::now();
        let reuse = self
            .reusable_prefix(&tokens)
            .min(shared)
            .min(tokens.len().saturating_sub(1));
        self.truncate_cache(reuse);
        let mut logits_index = self
            .decode_prompt(&tokens[reuse..shared], reuse, cancel)?
            .unwrap_or(0);
        let mut calibration = None;
        if let Some(cf) = &content_free {
            self.decode_prompt(&cf[shared..], shared, cancel)?;
            calibration = Some(self.score_names(plan, cf.len())?);
            self.truncate_cache(shared);
        }
        if let Some(index) = self.decode_prompt(&tokens[shared..], shared, cancel)? {
            logits_index = index;
        }
        let prompt_micros = elapsed_micros(started);

        // Generation.
        let started = Instant::now();
        let mut position = tokens.len();
        if plan.answer == Answer::None && position + 64 < self.n_ctx as usize && max_tokens >= 32 {
            match self.force_call_start(
                plan,
                &tokens,
                calibration.as_deref(),
                &mut samplers,
                &mut emitter,
                &mut position,
            )? {
                Forced::Nothing => {}
                Forced::Call(index) => logits_index = index,
                Forced::Reply(index) => {
                    // The model replies directly: from the end of the prompt, as a plain answer.
                    logits_index = index;
                    if let Some(reply) = &plan.reply {
                        emitter.router = OutputRouter::new(false, reply.plan.answer, &request.stop);
                    }
                    samplers.grammar = reply_grammar;
                }
            }
        }
        let reason = loop {
            if cancel.is_cancelled() {
                return Err(GenerateError::Cancelled);
            }
            if emitter.generated >= max_tokens {
                break StopReason::MaxTokens;
            }
            let token = self.sample(&mut samplers, logits_index, greedy)?;
            if vocab.is_eog(token) {
                break if emitter.router.completed_calls() > 0 {
                    StopReason::ToolCalls
                } else {
                    StopReason::EndOfTurn
                };
            }
            if let Some(grammar) = samplers.grammar.as_mut() {
                grammar
                    .try_accept(token)
                    .map_err(|e| GenerateError::Grammar(e.to_string()))?;
            }
            let done = emitter.token(&vocab, token)?;
            if emitter.router.is_free_text() {
                // Free text accepts anything: stop paying for the grammar.
                samplers.grammar = None;
            }
            if let Some(reason) = done {
                break reason;
            }
            if emitter.generated >= max_tokens {
                break StopReason::MaxTokens;
            }
            if position >= self.n_ctx as usize {
                break StopReason::ContextFull;
            }
            logits_index = self.decode(&[token], position, true)?;
            position += 1;
        };
        emitter.finish(Completion {
            reason,
            prompt_tokens,
            cached_prompt_tokens: u32::try_from(reuse).unwrap_or(u32::MAX),
            completion_tokens: emitter.generated,
            prompt_micros,
            generation_micros: elapsed_micros(started),
        });
        Ok(())
    }

    /// Evaluates `tokens` at positions `offset..`, asking for the logits of the last one when
    /// `logits_last`. Returns the batch index to read those logits at.
    fn decode(
        &mut self,
        tokens: &[LlamaToken],
        offset: usize,
        logits_last: bool,
    ) -> Result<i32, GenerateError> {
        if offset != self.cached.len() {
            // Every caller evaluates right after what the cache holds; anything else would
            // leave stale positions behind.
            return Err(GenerateError::Internal(format!(
                "evaluating at position {offset} with {} positions cached",
                self.cached.len()
            )));
        }
        self.batch.clear();
        for (i, token) in tokens.iter().enumerate() {
            let last = logits_last && i + 1 == tokens.len();
            self.batch
                .add(*token, to_pos(offset + i), &[0], last)
                .map_err(|e| GenerateError::Decode(e.to_string()))?;
        }
        if let Err(e) = self.context.decode(&mut self.batch) {
            // Part of the batch may be in the cache: start the next request from nothing.
            self.forget_cache();
            return Err(GenerateError::Decode(e.to_string()));
        }
        self.cached.extend_from_slice(tokens);
        Ok(self.batch.n_tokens() - 1)
    }

    /// Empties the KV cache.
    fn forget_cache(&mut self) {
        self.context.clear_kv_cache();
        self.cached.clear();
    }

    /// How many leading tokens of `prompt` the KV cache already holds.
    fn reusable_prefix(&self, prompt: &[LlamaToken]) -> usize {
        if !self.prompt_cache || !self.can_cut {
            return 0;
        }
        self.cached
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Cuts the KV cache back to its first `keep` positions (clearing it for `0`, or when the
    /// model cannot cut it).
    fn truncate_cache(&mut self, keep: usize) {
        if keep >= self.cached.len() {
            return;
        }
        let cut = keep > 0
            && self.can_cut
            && u32::try_from(keep)
                .ok()
                .and_then(|p0| {
                    self.context
                        .clear_kv_cache_seq(Some(0), Some(p0), None)
                        .ok()
                })
                .unwrap_or(false);
        if cut {
            self.cached.truncate(keep);
        } else {
            self.forget_cache();
        }
    }

    /// Evaluates prompt tokens at positions `offset..` in batches, with the logits of the last
    /// one; returns their batch index (`None` for no tokens).
    fn decode_prompt(
        &mut self,
        tokens: &[LlamaToken],
        offset: usize,
        cancel: &CancelToken,
    ) -> Result<Option<i32>, GenerateError> {
        let mut index = None;
        for (chunk_index, chunk) in tokens.chunks(self.n_batch).enumerate() {
            if cancel.is_cancelled() {
                return Err(GenerateError::Cancelled);
            }
            let at = offset + chunk_index * self.n_batch;
            let last = at + chunk.len() == offset + tokens.len();
            index = Some(self.decode(chunk, at, last)?);
        }
        Ok(index)
    }

    /// The names a forced call chooses among: the tools', then the reply option's.
    fn choice_names(&self, plan: &Plan) -> Vec<Vec<LlamaToken>> {
        let vocab = self.model.model.vocab();
        let mut names: Vec<Vec<LlamaToken>> = plan
            .tools
            .iter()
            .map(|tool| vocab.tokenize(tool.name.as_bytes(), false, false))
            .collect();
        if let Some(reply) = &plan.reply {
            names.push(vocab.tokenize(reply.name.as_bytes(), false, false));
        }
        names
    }

    /// The log-likelihood of each of [`Worker::choice_names`] right after
    /// the call prefix (`<tool_call>[{"name": "` or the template's form) written at `position` (the end of the evaluated prompt). Leaves
    /// the model's state as it found it.
    fn score_names(&mut self, plan: &Plan, position: usize) -> Result<Vec<f32>, GenerateError> {
        let vocab = self.model.model.vocab();
        let prefix = vocab.tokenize(self.call_prefix.as_bytes(), false, false);
        let names = self.choice_names(plan);
        let prefix_logits = self.decode(&prefix, position, true)?;
        let base = position + prefix.len();
        let after_prefix = self.context.get_logits_ith(prefix_logits).to_vec();
        let mut scores = Vec::with_capacity(names.len());
        for name in &names {
            let mut score = 0.0;
            for (k, token) in name.iter().enumerate() {
                let logits = if k == 0 {
                    after_prefix.as_slice()
                } else {
                    self.context.get_logits_ith(0)
                };
                score += log_softmax_at(logits, *token);
                if k + 1 < name.len() {
                    self.decode(&[*token], base + k, true)?;
                }
            }
            scores.push(score);
            // Roll the KV cache back to the end of the prefix.
            self.truncate_cache(base);
        }
        self.truncate_cache(position);
        Ok(scores)
    }

    /// For a required call, writes the call prefix (`<tool_call>[{"name": "`) and the tool's name without
    /// sampling. With several tools, the name is the one whose whole token sequence the model
    /// finds most likely at that point, less its likelihood there for a content-free prompt
    /// (`calibration`, when given): token-by-token greedy choice only compares the first
    /// tokens of the names, which for a small model picks the wrong tool far more often
    /// (measured on SmolLM2-135M: 7 of 9 right by first token, 9 of 10 by whole name).
    ///
    /// When the plan has a direct reply, the reply option's name competes with the tools'
    /// names; if it wins nothing is written, and [`Forced::Reply`] gives the logits at the end
    /// of the prompt to start the reply from.
    ///
    /// Returns [`Forced::Nothing`] (having forced nothing) if the grammar does not accept the
    /// prefix, which cannot happen with the grammars built here, or the model's state cannot
    /// be rolled back.
    fn force_call_start(
        &mut self,
        plan: &Plan,
        prompt: &[LlamaToken],
        calibration: Option<&[f32]>,
        samplers: &mut Samplers,
        emitter: &mut Emitter<'_>,
        position: &mut usize,
    ) -> Result<Forced, GenerateError> {
        let vocab = self.model.model.vocab();
        if samplers.grammar.is_none() {
            return Ok(Forced::Nothing);
        }
        if self.model.model.is_recurrent() || self.model.model.is_hybrid() {
            // Their state cannot be rolled back to score the names.
            return Ok(Forced::Nothing);
        }
        let Some(&last_prompt_token) = prompt.last() else {
            return Ok(Forced::Nothing);
        };
        let prefix = vocab.tokenize(self.call_prefix.as_bytes(), false, false);
        let names = self.choice_names(plan);
        // Check everything against a copy of the grammar first.
        if let Some(grammar) = samplers.grammar.as_ref() {
            let mut probe = grammar.clone();
            for token in &prefix {
                if probe.try_accept(*token).is_err() {
                    return Ok(Forced::Nothing);
                }
            }
            for name in &names[..plan.tools.len()] {
                let mut probe = probe.clone();
                if name.iter().any(|t| probe.try_accept(*t).is_err()) {
                    return Ok(Forced::Nothing);
                }
            }
        }

        let prompt_end = *position;
        let chosen = if names.len() == 1 {
            0
        } else {
            let mut scores = self.score_names(plan, prompt_end)?;
            if let Some(calibration) = calibration {
                for (score, neutral) in scores.iter_mut().zip(calibration) {
                    *score -= neutral;
                }
            }
            let mut best = (0, f32::NEG_INFINITY);
            for (i, score) in scores.iter().enumerate() {
                if *score > best.1 {
                    best = (i, *score);
                }
            }
            tracing::debug!(?scores, chosen = best.0, "call choice scores");
            best.0
        };
        if plan.reply.is_some() && chosen == plan.tools.len() {
            // The end of the prompt's logits were overwritten: evaluate its last token again.
            self.truncate_cache(prompt_end.saturating_sub(1));
            let index = self.decode(&[last_prompt_token], prompt_end - 1, true)?;
            return Ok(Forced::Reply(index));
        }
        let (Some(name), Some(grammar)) = (names.get(chosen), samplers.grammar.as_mut()) else {
            return Ok(Forced::Nothing);
        };
        let forced: Vec<LlamaToken> = prefix.iter().chain(name).copied().collect();
        for token in &forced {
            grammar
                .try_accept(*token)
                .map_err(|e| GenerateError::Grammar(e.to_string()))?;
            emitter.token(&vocab, *token)?;
        }
        let index = self.decode(&forced, prompt_end, true)?;
        *position = prompt_end + forced.len();
        Ok(Forced::Call(index))
    }

    /// Samples the next token. With a grammar, the token is first sampled without it and only
    /// checked against it; only when the grammar rejects it is the grammar applied to the rest
    /// of the vocabulary and the token sampled again (llama.cpp's `common_sampler` does the
    /// same). For greedy decoding this gives exactly the constrained argmax; for sampling it is
    /// rejection sampling, which draws from the same constrained distribution.
    fn sample(
        &self,
        samplers: &mut Samplers,
        index: i32,
        greedy: bool,
    ) -> Result<LlamaToken, GenerateError> {
        let Some(grammar) = samplers.grammar.as_mut() else {
            // Free text (or no constraint at all): the repeat penalty applies.
            let chain = samplers.text_chain.as_mut().unwrap_or(&mut samplers.chain);
            return Ok(chain.sample(&self.context, index));
        };
        let token = samplers.chain.sample(&self.context, index);
        if accepts(grammar, token) {
            return Ok(token);
        }
        let logits = self.context.get_logits_ith(index);
        let token = if greedy {
            constrained_argmax(grammar, logits)
        } else {
            let mut candidates = constrained_candidates(grammar, logits);
            samplers.chain.apply(&mut candidates);
            candidates.selected_token()
        };
        let token =
            token.ok_or_else(|| GenerateError::Grammar("no token satisfies the grammar".into()))?;
        samplers.chain.accept(token);
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn a_run_of_blank_tokens_ends_the_answer_and_any_text_breaks_it() {
        let mut run = BlankRun::default();
        for _ in 0..MAX_BLANK_TOKENS - 1 {
            assert!(!run.push(b"\n", "\n"));
        }
        // A character still incomplete neither counts nor breaks the run.
        assert!(!run.push(&[0xe2], ""));
        assert!(!run.push(b"word", "word"), "text breaks the run");
        for _ in 0..MAX_BLANK_TOKENS - 1 {
            assert!(!run.push(b" \n\t", " \n\t"));
        }
        assert!(
            run.push(b"  ", "  "),
            "the 64th blank token in a row ends it"
        );
        // A control token that renders as nothing is blank too.
        let mut run = BlankRun::default();
        for _ in 0..MAX_BLANK_TOKENS - 1 {
            assert!(!run.push(b"", ""));
        }
        assert!(run.push(b"", ""));
    }

    #[test]
    fn a_short_stretch_said_over_and_over_is_a_loop() {
        // "at the coffee shop," as 5 tokens, again and again: cut after 256 repeating tokens.
        let mut guard = LoopGuard::default();
        let phrase = [11, 12, 13, 14, 15];
        let mut cut = None;
        for n in 0..2000 {
            if guard.push(phrase[n % phrase.len()]) {
                cut = Some(n);
                break;
            }
        }
        assert_eq!(cut, Some(phrase.len() + MAX_LOOP_TOKENS as usize - 1));
        // A period of 32 is caught; text that only repeats now and then is not.
        let mut guard = LoopGuard::default();
        assert!((0..1000).any(|n| guard.push(n % 32)));
        let mut guard = LoopGuard::default();
        assert!(!(0..5000).any(|n| guard.push(if n % 97 == 0 { 1 } else { n })));
        // A period longer than the longest looked for is not.
        let mut guard = LoopGuard::default();
        assert!(!(0..5000).any(|n| guard.push(n % 33)));
        // The same token over and over is the shortest loop.
        let mut guard = LoopGuard::default();
        assert!((0..300).any(|_| guard.push(7)));
    }
}
