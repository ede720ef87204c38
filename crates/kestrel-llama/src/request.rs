//! What a caller sends to the engine and gets back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

impl Role {
    /// The role's name in chat templates.
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool call, as made by the model earlier in the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text. For [`Role::Tool`] messages, the tool's result.
    pub content: String,
    /// For assistant messages: the tool calls it made, rendered after `content`.
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the name of the tool that produced the result.
    pub tool_name: Option<String>,
}

impl ChatMessage {
    fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// An assistant message that called tools.
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::new(Role::Assistant, content)
        }
    }

    /// The result of a call to `tool`.
    pub fn tool_result(tool: impl Into<String>, result: impl Into<String>) -> Self {
        Self {
            tool_name: Some(tool.into()),
            ..Self::new(Role::Tool, result)
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its input (normally an object schema).
    pub parameters: Value,
    /// Whether the tool serves the agent itself rather than the user's request (memory's
    /// tools: working memory, recall). A call is never forced onto it: the first step of
    /// [`AutoToolPolicy::CallThenAnswer`] neither shows nor offers it, and
    /// [`ToolChoice::Required`] chooses among the other tools when there are any. With
    /// [`AutoToolPolicy::ModelDecides`], or named by [`ToolChoice::Tool`], it is a tool like
    /// any other.
    pub auxiliary: bool,
}

impl ToolSpec {
    /// A tool (not auxiliary).
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            auxiliary: false,
        }
    }

    /// Marks the tool auxiliary (see [`ToolSpec::auxiliary`]).
    pub fn auxiliary(mut self) -> Self {
        self.auxiliary = true;
        self
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model chooses between answering and calling tools.
    #[default]
    Auto,
    /// No tool calls; the tools are not shown to the model.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// How [`ToolChoice::Auto`] is decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AutoToolPolicy {
    /// The model decides: the grammar allows either a tool-call block or an answer, and the
    /// model's first character picks. Right for models that can judge when a tool applies.
    #[default]
    ModelDecides,
    /// Call, then answer: while no tool result has arrived since the last user message, the
    /// model either calls one of the tools that are not auxiliary or replies directly, chosen
    /// by the likelihood of each name (see the crate docs); once results are in, it answers
    /// without calling again. For small models such as SmolLM2-135M, which cannot judge
    /// whether a tool applies and, left to decide, almost never call one.
    CallThenAnswer,
}

impl AutoToolPolicy {
    /// What `choice` comes to for a conversation ending with `messages`.
    pub(crate) fn resolve(self, choice: &ToolChoice, messages: &[ChatMessage]) -> Choice {
        match (self, choice) {
            (AutoToolPolicy::CallThenAnswer, ToolChoice::Auto) => {
                let results_since_user = messages
                    .iter()
                    .rev()
                    .take_while(|m| m.role != Role::User)
                    .any(|m| m.role == Role::Tool);
                if results_since_user {
                    Choice::None
                } else {
                    Choice::CallOrReply
                }
            }
            (_, choice) => Choice::from(choice),
        }
    }
}

/// A request's tool choice once the [`AutoToolPolicy`] is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The model decides, with every tool.
    Auto,
    /// No tools.
    None,
    /// A call to one of the tools that are not auxiliary (to an auxiliary one when there are
    /// no others).
    Required,
    /// A call to this tool.
    Tool(String),
    /// The first step of call-then-answer: a call to one of the tools that are not auxiliary,
    /// or a direct reply, chosen by the model's likelihood of each tool's name and of the
    /// reply option's.
    CallOrReply,
}

impl From<&ToolChoice> for Choice {
    fn from(choice: &ToolChoice) -> Self {
        match choice {
            ToolChoice::Auto => Choice::Auto,
            ToolChoice::None => Choice::None,
            ToolChoice::Required => Choice::Required,
            ToolChoice::Tool(name) => Choice::Tool(name.clone()),
        }
    }
}

/// A cancellation flag shared between a caller and the engine. The engine checks it between
/// tokens (and between prompt batches); a queued request that is cancelled is skipped.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that has not fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the token. Idempotent.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the token has fired.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One generation request.
#[derive(Debug, Clone, Default)]
pub struct GenerateRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// How [`ToolChoice::Auto`] is decided.
    pub auto_tool_policy: AutoToolPolicy,
    /// Whether one answer may hold several tool calls (up to four). Off by default: small
    /// models tend to repeat the same call.
    pub parallel_tool_calls: bool,
    /// When set, the answer must be JSON matching this schema (structured output).
    pub response_schema: Option<Value>,
    /// Sampling temperature; `None` or `0` means greedy (deterministic) decoding.
    pub temperature: Option<f32>,
    /// Nucleus sampling (only with a temperature above 0).
    pub top_p: Option<f32>,
    /// Seed for sampling; `None` picks a random one. Ignored by greedy decoding.
    pub seed: Option<u64>,
    /// Most tokens to generate; `None` means until the context window is full.
    pub max_tokens: Option<u32>,
    /// Penalises repeating recent tokens in free text (never inside tool calls or JSON
    /// answers, whose syntax repeats by nature). `None`: no penalty.
    pub repeat_penalty: Option<RepeatPenalty>,
    /// Strings that end free-text generation (not applied inside tool calls or JSON answers,
    /// which would be cut into invalid output).
    pub stop: Vec<String>,
    /// Cancels the request.
    pub cancel: CancelToken,
}

impl GenerateRequest {
    /// A request for `messages` with default settings (greedy, no tools).
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

/// llama.cpp's repeat penalty: the logits of tokens among the last `last_n` free-text tokens
/// are divided by `penalty` (multiplied, when negative). Greedy decoding on small models
/// otherwise tends to loop ("I'm glad to hear that. I'm glad to hear that. ...") until the
/// context is full.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatPenalty {
    /// Above 1 penalises; 1 is no penalty.
    pub penalty: f32,
    /// How many recent tokens count (at least 1).
    pub last_n: u32,
}

impl RepeatPenalty {
    /// A penalty of `penalty` over the last `last_n` tokens.
    pub fn new(penalty: f32, last_n: u32) -> Self {
        Self { penalty, last_n }
    }
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GenerationEvent {
    /// Answer text (free text, or the JSON of a structured answer).
    Text(String),
    /// The model started tool call number `index` (0-based within this answer).
    ToolCallStart {
        /// The call's position.
        index: usize,
        /// The tool's name.
        name: String,
    },
    /// The next piece of a call's JSON arguments.
    ToolCallDelta {
        /// The call's position.
        index: usize,
        /// Argument text.
        delta: String,
    },
    /// A tool call is complete; `arguments` is the concatenation of its deltas.
    ToolCallEnd {
        /// The call's position.
        index: usize,
        /// The tool's name.
        name: String,
        /// The complete JSON arguments.
        arguments: String,
    },
    /// Generation ended. Always the last event of a successful generation.
    Finished(Completion),
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model ended its turn (end-of-generation token, or a complete JSON answer).
    EndOfTurn,
    /// A stop sequence was produced (it is not part of the text).
    StopSequence,
    /// The model made tool calls.
    ToolCalls,
    /// `max_tokens` was reached.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// The output went round one short stretch of tokens too many times in a row: a model
    /// stuck in a loop (SmolLM2-135M wrote "at the coffee shop," into an email's body until
    /// the context was full), cut as a length limit would cut it.
    Repetition,
}

/// Summary of a finished generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// Why it stopped.
    pub reason: StopReason,
    /// Tokens in the prompt.
    pub prompt_tokens: u32,
    /// Of those, how many were already in the KV cache from the request before (a shared
    /// prefix is not evaluated again); `prompt_micros` covers only the rest.
    pub cached_prompt_tokens: u32,
    /// Tokens generated.
    pub completion_tokens: u32,
    /// Time spent evaluating the prompt, in microseconds.
    pub prompt_micros: u64,
    /// Time spent generating, in microseconds (from the first generated token's evaluation
    /// to the end).
    pub generation_micros: u64,
}
