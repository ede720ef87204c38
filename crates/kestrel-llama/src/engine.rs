//! The engine: one loaded model, one inference context, one worker thread that serves
//! requests in order.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::error::{GenerateError, LoadError};
use crate::grammar::{self, Answer, Plan};
use crate::output::OutputRouter;
use crate::prompt;
use crate::request::{
    CancelToken, Choice, Completion, GenerateRequest, GenerationEvent, StopReason, ToolCall,
};
use crate::template::{ChatTemplate, Segment};
use crate::text::Utf8Decoder;

/// How to load a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Context window in tokens (prompt + answer); default 2048. Capped at the model's
    /// training context. The KV cache for it is allocated up front: about 23 KB per token for
    /// SmolLM2-135M, so 2048 tokens keep the whole process near 170 MB and 4096 near 215 MB.
    pub context_size: u32,
    /// Threads for generation and prompt processing; `None` uses all available cores.
    pub threads: Option<u32>,
    /// Most prompt tokens evaluated in one batch.
    pub batch_size: u32,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            context_size: 2048,
            threads: None,
            batch_size: 512,
        }
    }
}

/// Facts about the loaded model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The file.
    pub path: PathBuf,
    /// `general.architecture` (e.g. `llama`).
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// The context window in use.
    pub context_size: u32,
    /// The context the model was trained with.
    pub train_context_size: u32,
    /// Vocabulary size.
    pub vocab_size: u32,
    /// Parameter count.
    pub parameters: u64,
    /// Size of the weights in bytes.
    pub size_bytes: u64,
    /// Whether the GGUF has a chat template (otherwise ChatML is used).
    pub has_chat_template: bool,
    /// Threads used.
    pub threads: u32,
}

/// A complete answer, as collected by [`Generation::collect_blocking`] or
/// [`Generation::collect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The answer text.
    pub text: String,
    /// The tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// How generation ended.
    pub completion: Completion,
}

type EventResult = Result<GenerationEvent, GenerateError>;

/// One request in flight: its events arrive through a channel fed by the worker thread.
///
/// Dropping it cancels the request. It keeps the engine alive until it is dropped.
pub struct Generation {
    events: UnboundedReceiver<EventResult>,
    cancel: CancelToken,
    _engine: Arc<Shared>,
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("cancel", &self.cancel)
            .finish_non_exhaustive()
    }
}

impl Generation {
    /// The next event; `None` after the last one (`Finished`, or an error).
    pub async fn next(&mut self) -> Option<EventResult> {
        self.events.recv().await
    }

    /// Like [`Generation::next`] but blocking the thread. Do not call it from async code.
    pub fn blocking_next(&mut self) -> Option<EventResult> {
        self.events.blocking_recv()
    }

    /// The request's cancel token.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// Cancels the request; the engine stops before its next token.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the whole answer.
    pub async fn collect(mut self) -> Result<Output, GenerateError> {
        let mut collector = Collector::default();
        while let Some(event) = self.next().await {
            if let Some(output) = collector.add(event?) {
                return Ok(output);
            }
        }
        Err(GenerateError::EngineStopped)
    }

    /// Waits for the whole answer, blocking the thread. Do not call it from async code.
    pub fn collect_blocking(mut self) -> Result<Output, GenerateError> {
        let mut collector = Collector::default();
        while let Some(event) = self.blocking_next() {
            if let Some(output) = collector.add(event?) {
                return Ok(output);
            }
        }
        Err(GenerateError::EngineStopped)
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

#[derive(Default)]
struct Collector {
    text: String,
    calls: Vec<ToolCall>,
}

impl Collector {
    fn add(&mut self, event: GenerationEvent) -> Option<Output> {
        match event {
            GenerationEvent::Text(text) => self.text.push_str(&text),
            GenerationEvent::ToolCallEnd {
                name, arguments, ..
            } => self.calls.push(ToolCall { name, arguments }),
            GenerationEvent::ToolCallStart { .. } | GenerationEvent::ToolCallDelta { .. } => {}
            GenerationEvent::Finished(completion) => {
                return Some(Output {
                    text: std::mem::take(&mut self.text),
                    tool_calls: std::mem::take(&mut self.calls),
                    completion,
                });
            }
        }
        None
    }
}

/// A queued request.
struct Job {
    request: GenerateRequest,
    plan: Plan,
    /// The plan's grammar, compiled against the vocabulary.
    grammar: Option<LlamaSampler>,
    /// The grammar of the plan's direct reply, if it has one.
    reply_grammar: Option<LlamaSampler>,
    events: UnboundedSender<EventResult>,
}

/// What the engine handle and the worker share: the model and the chat template.
struct Model {
    model: LlamaModel,
    template: ChatTemplate,
}

impl Model {
    /// Renders and tokenizes the prompt (see [`crate::template`] for injection safety).
    fn prompt_tokens(&self, request: &GenerateRequest, plan: &Plan) -> Vec<LlamaToken> {
        let messages =
            prompt::template_messages(&request.messages, plan, self.template.handles_tool_role());
        let (segments, how) = self.template.render(&messages);
        tracing::trace!(?how, prompt = %segments.iter().map(|s| s.text.as_str()).collect::<String>(), "rendered prompt");
        self.tokenize_segments(&segments)
    }

    /// The prompt with the last user message replaced by content-free text: the model's
    /// preference among the names with nothing to go on, which the choice of a forced call
    /// subtracts (contextual calibration). `None` without a user message.
    fn content_free_tokens(
        &self,
        request: &GenerateRequest,
        plan: &Plan,
        text: &str,
    ) -> Option<Vec<LlamaToken>> {
        let last_user = request
            .messages
            .iter()
            .rposition(|m| m.role == crate::request::Role::User)?;
        let mut messages = request.messages.clone();
        messages[last_user].content = text.to_string();
        let messages =
            prompt::template_messages(&messages, plan, self.template.handles_tool_role());
        let (segments, _) = self.template.render(&messages);
        Some(self.tokenize_segments(&segments))
    }

    fn tokenize_segments(&self, segments: &[Segment]) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let mut tokens = Vec::new();
        for segment in segments {
            vocab.tokenize_into(segment.text.as_bytes(), &mut tokens, false, segment.special);
        }
        if vocab.should_add_bos() && tokens.first() != Some(&vocab.bos()) {
            tokens.insert(0, vocab.bos());
        }
        tokens
    }
}

/// A loaded GGUF model with its worker thread. Cheap to clone; all clones share the model.
///
/// Requests are served one at a time, in arrival order, by a dedicated OS thread that owns the
/// single llama.cpp context (so the async runtime never runs inference). The KV cache is
/// cleared between requests.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

struct Shared {
    info: ModelInfo,
    model: Arc<Model>,
    /// `None` only while dropping.
    jobs: Option<mpsc::Sender<Job>>,
    /// The worker thread, joined on drop: a process that ends right after dropping its engine
    /// must not exit while the worker is still freeing llama.cpp's context (that crashed, as
    /// C++ static destructors ran under it).
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Closing the queue ends the worker's loop; generations keep the engine alive, so the
        // queue is empty and at most a cancelled request is winding down.
        self.jobs.take();
        if let Some(worker) = self.worker.take()
            && worker.join().is_err()
        {
            tracing::error!("the local model's worker thread panicked");
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("info", &self.shared.info)
            .finish()
    }
}

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

fn backend() -> Result<&'static LlamaBackend, LoadError> {
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs to stderr by default; send it to `tracing` instead.
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LoadError::Backend(e.clone()))
}

impl Engine {
    /// Loads the GGUF model at `path` and starts its worker thread. This reads the file and
    /// allocates the context: call it from a blocking thread (`spawn_blocking`) in async code.
    pub fn load(path: impl AsRef<Path>, options: EngineOptions) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let preflight = crate::gguf::preflight(path)?;
        let backend = backend()?;
        let model =
            LlamaModel::load_from_file(backend, &preflight.path_str, &LlamaModelParams::default())
                .map_err(|_| LoadError::ModelLoad {
                    path: path.to_path_buf(),
                    architecture: preflight.architecture.clone(),
                })?;

        let vocab = model.vocab();
        let piece = |token: LlamaToken| {
            String::from_utf8_lossy(&vocab.token_to_piece(token, true, None)).into_owned()
        };
        let bos = piece(vocab.bos());
        let eos = piece(vocab.eos());
        let template_source = model
            .chat_template(None)
            .ok()
            .and_then(|t| t.to_string().ok());
        let has_chat_template = template_source.is_some();
        let template = ChatTemplate::new(template_source, bos, eos);
        let threads = options.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(1))
                .unwrap_or(1)
        });
        let train_context_size = model.n_ctx_train();
        let context_size = options.context_size.clamp(16, train_context_size.max(16));
        let info = ModelInfo {
            path: path.to_path_buf(),
            architecture: preflight.architecture,
            name: preflight.name,
            context_size,
            train_context_size,
            vocab_size: u32::try_from(model.n_vocab()).unwrap_or(0),
            parameters: model.n_params(),
            size_bytes: model.size(),
            has_chat_template,
            threads: threads.max(1),
        };
        let model = Arc::new(Model { model, template });

        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), LoadError>>(1);
        let worker_model = model.clone();
        let worker_info = info.clone();
        let batch_size = options.batch_size.max(1);
        let worker = std::thread::Builder::new()
            .name("kestrel-llama".into())
            .spawn(move || {
                worker_main(
                    backend,
                    &worker_model,
                    &worker_info,
                    batch_size,
                    queue,
                    ready_tx,
                )
            })
            .map_err(|e| LoadError::Backend(format!("cannot spawn the worker thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                // The worker has returned; nothing to wait for but its exit.
                let _ = worker.join();
                return Err(error);
            }
            Err(_) => {
                let _ = worker.join();
                return Err(LoadError::Backend(
                    "the worker thread died while starting".into(),
                ));
            }
        }
        tracing::debug!(?info, "local model loaded");
        Ok(Self {
            shared: Arc::new(Shared {
                info,
                model,
                jobs: Some(jobs),
                worker: Some(worker),
            }),
        })
    }

    /// Facts about the loaded model.
    pub fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    /// Queues a request and returns its event stream. Requests are served one at a time in
    /// arrival order.
    ///
    /// Fails right away on an invalid request or a schema the grammar cannot enforce; a
    /// prompt that does not fit the context fails as the stream's first item, since the prompt
    /// is rendered and tokenized on the worker thread.
    pub fn generate(&self, request: GenerateRequest) -> Result<Generation, GenerateError> {
        validate(&request)?;
        let plan = request_plan(&request)?;
        // Compiled here so that a grammar llama.cpp refuses (too many repetitions from huge
        // `minItems`/`maxItems`...) fails the call right away.
        let compile = |gbnf: &Option<String>| -> Result<Option<LlamaSampler>, GenerateError> {
            match gbnf {
                Some(gbnf) => Ok(Some(
                    LlamaSampler::grammar(&self.shared.model.model, gbnf, "root").map_err(|e| {
                        GenerateError::Grammar(format!(
                            "{e} (llama.cpp's log says why; very large minItems/maxItems are a common cause)"
                        ))
                    })?,
                )),
                None => Ok(None),
            }
        };
        let grammar = compile(&plan.gbnf)?;
        let reply_grammar = match &plan.reply {
            Some(reply) => compile(&reply.plan.gbnf)?,
            None => None,
        };
        let (events, receiver) = unbounded_channel();
        let cancel = request.cancel.clone();
        self.shared
            .jobs
            .as_ref()
            .ok_or(GenerateError::EngineStopped)?
            .send(Job {
                request,
                plan,
                grammar,
                reply_grammar,
                events,
            })
            .map_err(|_| GenerateError::EngineStopped)?;
        Ok(Generation {
            events: receiver,
            cancel,
            _engine: self.shared.clone(),
        })
    }

    /// The number of tokens `text` takes (plain text, no special tokens). CPU work
    /// proportional to the text's length.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.shared
            .model
            .model
            .vocab()
            .tokenize(text.as_bytes(), false, false)
            .len()
    }

    /// The number of prompt tokens `request` would take. CPU work (rendering and tokenizing).
    pub fn count_prompt_tokens(&self, request: &GenerateRequest) -> Result<usize, GenerateError> {
        let plan = request_plan(request)?;
        Ok(self.shared.model.prompt_tokens(request, &plan).len())
    }

    /// The prompt text `request` renders to (template-written special tokens included), for
    /// debugging.
    pub fn render_prompt(&self, request: &GenerateRequest) -> Result<String, GenerateError> {
        let plan = request_plan(request)?;
        let template = &self.shared.model.template;
        let messages =
            prompt::template_messages(&request.messages, &plan, template.handles_tool_role());
        let (segments, _) = template.render(&messages);
        Ok(segments.iter().map(|s| s.text.as_str()).collect())
    }

    /// The grammar (GBNF) `request` would be decoded under, if any.
    pub fn grammar(&self, request: &GenerateRequest) -> Result<Option<String>, GenerateError> {
        Ok(request_plan(request)?.gbnf)
    }
}

/// The constraints `request` is decoded under.
fn request_plan(request: &GenerateRequest) -> Result<Plan, GenerateError> {
    // Earlier calls in the conversation are replayed as `<tool_call>` blocks, which a small
    // model answering without tools tends to imitate.
    let after_calls = request
        .messages
        .iter()
        .any(|m| !m.tool_calls.is_empty() || m.role == crate::request::Role::Tool);
    grammar::plan(
        &request.tools,
        &effective_choice(request),
        request.response_schema.as_ref(),
        request.parallel_tool_calls,
        after_calls,
    )
}

fn effective_choice(request: &GenerateRequest) -> Choice {
    if request.tools.is_empty() {
        // Nothing to call: `Auto` and the policy mean plain answers.
        return match &request.tool_choice {
            crate::request::ToolChoice::Auto => Choice::None,
            other => Choice::from(other),
        };
    }
    request
        .auto_tool_policy
        .resolve(&request.tool_choice, &request.messages)
}

fn validate(request: &GenerateRequest) -> Result<(), GenerateError> {
    if let Some(t) = request.temperature
        && (!t.is_finite() || t < 0.0)
    {
        return Err(GenerateError::InvalidRequest(format!(
            "temperature must be a finite number >= 0, got {t}"
        )));
    }
    if let Some(p) = request.top_p
        && (!p.is_finite() || p <= 0.0 || p > 1.0)
    {
        return Err(GenerateError::InvalidRequest(format!(
            "top_p must be in (0, 1], got {p}"
        )));
    }
    if request.max_tokens == Some(0) {
        return Err(GenerateError::InvalidRequest(
            "max_tokens must be at least 1".into(),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Worker

fn worker_main(
    backend: &'static LlamaBackend,
    model: &Model,
    info: &ModelInfo,
    batch_size: u32,
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
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    drop(ready);
    // Ends when every `Engine` clone is dropped.
    while let Ok(job) = queue.recv() {
        let events = job.events.clone();
        // A panic inside a request (a bug, here or in the bindings) fails that request only;
        // the KV cache is cleared at the start of the next one anyway.
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
        let done = self.router.push(&text, &mut self.out);
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

/// The text a required tool call starts with, up to the tool's name.
const CALL_PREFIX: &str = r#"<tool_call>[{"name": ""#;

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
        let tokens = self.model.prompt_tokens(&request, plan);
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

        // Prompt.
        let started = Instant::now();
        self.context.clear_kv_cache();
        let mut logits_index = self
            .decode_prompt(&tokens[..shared], 0, cancel)?
            .unwrap_or(0);
        let mut calibration = None;
        if let Some(cf) = &content_free {
            self.decode_prompt(&cf[shared..], shared, cancel)?;
            calibration = Some(self.score_names(plan, cf.len())?);
            let _ = self
                .context
                .clear_kv_cache_seq(Some(0), u32::try_from(shared).ok(), None);
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
        self.batch.clear();
        for (i, token) in tokens.iter().enumerate() {
            let last = logits_last && i + 1 == tokens.len();
            self.batch
                .add(*token, to_pos(offset + i), &[0], last)
                .map_err(|e| GenerateError::Decode(e.to_string()))?;
        }
        self.context
            .decode(&mut self.batch)
            .map_err(|e| GenerateError::Decode(e.to_string()))?;
        Ok(self.batch.n_tokens() - 1)
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
    /// `<tool_call>[{"name": "` written at `position` (the end of the evaluated prompt). Leaves
    /// the model's state as it found it.
    fn score_names(&mut self, plan: &Plan, position: usize) -> Result<Vec<f32>, GenerateError> {
        let vocab = self.model.model.vocab();
        let prefix = vocab.tokenize(CALL_PREFIX.as_bytes(), false, false);
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
            let _ = self
                .context
                .clear_kv_cache_seq(Some(0), u32::try_from(base).ok(), None);
        }
        let _ = self
            .context
            .clear_kv_cache_seq(Some(0), u32::try_from(position).ok(), None);
        Ok(scores)
    }

    /// For a required call, writes `<tool_call>[{"name": "` and the tool's name without
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
        let prefix = vocab.tokenize(CALL_PREFIX.as_bytes(), false, false);
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
            let _ = self.context.clear_kv_cache_seq(
                Some(0),
                u32::try_from(prompt_end.saturating_sub(1)).ok(),
                None,
            );
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

/// Candidates passed to the grammar at once. llama.cpp's grammar check allocates two
/// candidate-sized vectors per matched character and grammar stack, so checking all 49k tokens
/// of a vocabulary at once costs tens of MB of transient memory; chunks keep that small.
const GRAMMAR_CHUNK: usize = 2048;
/// Best-scoring tokens tried first when looking for the constrained argmax.
const GREEDY_HEAD: usize = 256;

/// Whether the grammar accepts `token` next.
fn accepts(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
    grammar.apply(&mut single);
    single
        .data
        .first()
        .is_some_and(|d| d.logit() != f32::NEG_INFINITY)
}

/// Applies the grammar to `candidates` in chunks, setting rejected logits to -inf.
fn apply_chunked(grammar: &mut LlamaSampler, candidates: &mut [LlamaTokenData]) {
    for chunk in candidates.chunks_mut(GRAMMAR_CHUNK) {
        let mut array = LlamaTokenDataArray::new(chunk.to_vec(), false);
        grammar.apply(&mut array);
        // The grammar sampler only changes logits, in place and in order.
        for (slot, data) in chunk.iter_mut().zip(&array.data) {
            slot.set_logit(data.logit());
        }
    }
}

/// The highest-logit token the grammar accepts: the best few hundred tokens are checked
/// first, and the rest only if none of them fits.
fn constrained_argmax(grammar: &mut LlamaSampler, logits: &[f32]) -> Option<LlamaToken> {
    let mut candidates: Vec<LlamaTokenData> = logits
        .iter()
        .enumerate()
        .map(|(id, &logit)| LlamaTokenData::new(LlamaToken(to_pos(id)), logit, 0.0))
        .collect();
    let head = GREEDY_HEAD.min(candidates.len());
    if head == 0 {
        return None;
    }
    candidates.select_nth_unstable_by(head - 1, |a, b| b.logit().total_cmp(&a.logit()));
    let (first, rest) = candidates.split_at_mut(head);
    for part in [first, rest] {
        apply_chunked(grammar, part);
        let best = part
            .iter()
            .filter(|d| d.logit() != f32::NEG_INFINITY)
            .max_by(|a, b| a.logit().total_cmp(&b.logit()));
        if let Some(best) = best {
            return Some(best.id());
        }
    }
    None
}

/// The whole vocabulary with the tokens the grammar rejects set to -inf.
fn constrained_candidates(grammar: &mut LlamaSampler, logits: &[f32]) -> LlamaTokenDataArray {
    let mut candidates: Vec<LlamaTokenData> = logits
        .iter()
        .enumerate()
        .map(|(id, &logit)| LlamaTokenData::new(LlamaToken(to_pos(id)), logit, 0.0))
        .collect();
    apply_chunked(grammar, &mut candidates);
    LlamaTokenDataArray::new(candidates, false)
}

/// Temperature 0 (or unset) is greedy; otherwise temperature, then top-p, then a seeded draw.
/// With a repeat penalty (and the vocabulary's size), that comes first.
fn sampling_chain(
    request: &GenerateRequest,
    penalty: Option<(crate::request::RepeatPenalty, i32)>,
) -> LlamaSampler {
    let mut chain = Vec::new();
    if let Some((penalty, n_vocab)) = penalty {
        chain.push(LlamaSampler::penalties(
            n_vocab,
            i32::try_from(penalty.last_n.max(1)).unwrap_or(i32::MAX),
            penalty.penalty,
            0.0,
            0.0,
        ));
    }
    let temperature = request.temperature.unwrap_or(0.0);
    if temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
        return match chain.len() {
            1 => chain.remove(0),
            _ => LlamaSampler::chain_simple(chain),
        };
    }
    let seed = match request.seed {
        // Fold the 64-bit seed into llama.cpp's 32 bits.
        Some(seed) => (seed as u32) ^ ((seed >> 32) as u32),
        None => random_seed(),
    };
    chain.push(LlamaSampler::temp(temperature));
    if let Some(top_p) = request.top_p
        && top_p < 1.0
    {
        chain.push(LlamaSampler::top_p(top_p, 1));
    }
    chain.push(LlamaSampler::dist(seed));
    LlamaSampler::chain_simple(chain)
}

fn random_seed() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    // 0xFFFFFFFF means "random" to llama.cpp, which is fine too.
    hasher.finish() as u32
}

/// `log softmax(logits)[token]`.
fn log_softmax_at(logits: &[f32], token: LlamaToken) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let logit = usize::try_from(token.0)
        .ok()
        .and_then(|i| logits.get(i))
        .copied()
        .unwrap_or(f32::NEG_INFINITY);
    logit - max - sum.ln()
}

fn to_pos(position: usize) -> i32 {
    i32::try_from(position).unwrap_or(i32::MAX)
}

fn elapsed_micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}
