//! The engine: one loaded model, one inference context, one worker thread that serves
//! requests in order.
//!
//! This module owns the engine handle, its options and facts, and the request stream; the
//! worker thread lives in `worker`, token selection in `sampling`.

mod sampling;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, mpsc};

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::error::{GenerateError, LoadError};
use crate::grammar::{self, Plan};
use crate::prompt;
use crate::request::{
    CancelToken, ChatMessage, Choice, Completion, GenerateRequest, GenerationEvent, ToolCall,
};
use crate::template::{ChatTemplate, Segment};
use worker::worker_main;

/// How to load a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Context window in tokens (prompt + answer); default 4096 (an agent's prompt with a few
    /// tools listed is already 1,300 to 1,500 tokens). Capped at the model's training context.
    /// The KV cache for it is allocated up front: about 23 KB per token for SmolLM2-135M (2048
    /// tokens keep the whole process near 170 MB, 4096 near 215 MB), 12 KB for
    /// Qwen2.5-Coder-0.5B, 28 KB for Qwen2.5-Coder-1.5B.
    pub context_size: u32,
    /// Threads for generation and prompt processing; `None` uses all available cores.
    pub threads: Option<u32>,
    /// Most prompt tokens evaluated in one batch.
    pub batch_size: u32,
    /// Whether a request reuses the KV cache of the one before for the prompt prefix they share
    /// (default `true`): an agent's next step or a conversation's next turn then evaluates only
    /// its new messages. Greedy output can differ from a cold start in rare near-ties, since
    /// the shared prefix was evaluated in other batches; turn it off to make every request
    /// independent of the ones before it.
    pub prompt_cache: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            context_size: 4096,
            threads: None,
            batch_size: 512,
            prompt_cache: true,
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

/// How a prompt shows tools and calls, which decides how a forced call starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallFormat {
    /// This crate's instructions: `<tool_call>[{"name": ...}]</tool_call>`.
    Own,
    /// The chat template's own (Qwen's `<tool_call>\n{"name": ...}\n</tool_call>`).
    Template,
}

impl CallFormat {
    /// The text a forced call starts with, up to the tool's name.
    pub(crate) fn call_prefix(self) -> &'static str {
        match self {
            CallFormat::Own => r#"<tool_call>[{"name": ""#,
            CallFormat::Template => "<tool_call>\n{\"name\": \"",
        }
    }
}

impl Model {
    /// Renders `messages` for `plan`: with the tools listed by the chat template when it
    /// can (the format the model was trained on), else in this crate's words.
    fn render(&self, messages: &[ChatMessage], plan: &Plan) -> (Vec<Segment>, CallFormat) {
        if plan.calls() && self.template.renders_tools() {
            let (native, tools) = prompt::native_messages(messages, plan);
            if let Some(segments) = self.template.render_with_tools(&native, &tools) {
                return (segments, CallFormat::Template);
            }
        }
        let messages = prompt::template_messages(messages, plan, self.template.handles_tool_role());
        (self.template.render(&messages).0, CallFormat::Own)
    }

    /// Renders and tokenizes the prompt (see [`crate::template`] for injection safety).
    fn prompt_tokens(
        &self,
        request: &GenerateRequest,
        plan: &Plan,
    ) -> (Vec<LlamaToken>, CallFormat) {
        let (segments, format) = self.render(&request.messages, plan);
        tracing::trace!(?format, prompt = %segments.iter().map(|s| s.text.as_str()).collect::<String>(), "rendered prompt");
        (self.tokenize_segments(&segments), format)
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
        let (segments, _) = self.render(&messages, plan);
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

pub(crate) fn backend() -> Result<&'static LlamaBackend, LoadError> {
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
        let prompt_cache = options.prompt_cache;
        let worker = std::thread::Builder::new()
            .name("kestrel-llama".into())
            .spawn(move || {
                worker_main(
                    backend,
                    &worker_model,
                    &worker_info,
                    batch_size,
                    prompt_cache,
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
        Ok(self.shared.model.prompt_tokens(request, &plan).0.len())
    }

    /// The prompt text `request` renders to (template-written special tokens included), for
    /// debugging.
    pub fn render_prompt(&self, request: &GenerateRequest) -> Result<String, GenerateError> {
        let plan = request_plan(request)?;
        let (segments, _) = self.shared.model.render(&request.messages, &plan);
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
