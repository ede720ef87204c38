//! Kestrel's embedded local model engine: a GGUF model run in-process through llama.cpp
//! (`llama-cpp-2`), with chat templates, streaming, cancellation and grammar-constrained tool
//! calls and structured output.
//!
//! This crate is a pure engine with no dependency on `kestrel-core`; the `local` provider of
//! `kestrel-core` adapts it to the `LanguageModel` trait.
//!
//! ```no_run
//! use kestrel_llama::{ChatMessage, Engine, EngineOptions, GenerateRequest};
//!
//! let engine = Engine::load("SmolLM2-135M-Instruct.Q4_1.gguf", EngineOptions::default())?;
//! let request = GenerateRequest::new(vec![ChatMessage::user("Name three colours.")]);
//! let output = engine.generate(request)?.collect_blocking()?;
//! println!("{}", output.text);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! - **One model, one context, one worker.** [`Engine::load`] loads the model and starts a
//!   dedicated OS thread that owns the only llama.cpp context. [`Engine::generate`] queues a
//!   request and returns a [`Generation`] whose events arrive over a channel; requests are
//!   served one at a time in arrival order. This is the simplest correct design on a CPU:
//!   llama.cpp already uses every core for one sequence, so interleaving requests would not
//!   make them faster. Inference never runs on an async runtime's threads; [`Engine::load`]
//!   itself blocks and belongs in `spawn_blocking`.
//! - **Prompt cache.** The KV cache keeps what the last request evaluated; the next one
//!   evaluates only what follows the prefix they share. An agent's second step (its first
//!   prompt, the call, the result) or a conversation's next turn then costs its new tokens, not
//!   the whole prompt again: with tools listed, that prompt is over a thousand tokens. What was
//!   reused is reported in [`Completion::cached_prompt_tokens`];
//!   [`EngineOptions::prompt_cache`] turns it off.
//! - **Cancellation.** A [`CancelToken`] (or dropping the [`Generation`]) stops the request
//!   before its next token, or before its next prompt batch; a cancelled request still in the
//!   queue is skipped.
//! - **Chat template.** The GGUF's `tokenizer.chat_template` is rendered with `minijinja`
//!   (Hugging Face settings: `trim_blocks`, `lstrip_blocks`, Python string methods). A missing
//!   template, or one that fails to render, falls back to ChatML. llama.cpp's own
//!   `llama_chat_apply_template` is not used: it is a heuristic and, for SmolLM2, drops the
//!   template's default system prompt.
//! - **Injection safety.** Only text written by the template is tokenized with special-token
//!   parsing; message contents (including tool descriptions and results) are tokenized as plain
//!   text, so a user typing `<|im_end|>` cannot end their turn. See `template.rs`.
//! - **Streaming.** Token bytes go through a UTF-8 decoder that holds back sequences split
//!   across tokens; stop sequences are matched on the text and never leak into the output.
//! - **Limits.** A prompt that does not leave one token free in the context window fails with
//!   [`GenerateError::ContextOverflow`]; generation stops at `max_tokens` or when the context
//!   is full, and a free-text answer ends after 64 tokens in a row of nothing but whitespace
//!   (small models sometimes never close their turn). Greedy decoding (temperature 0, the
//!   default) is deterministic.
//! - **Errors.** Loading reports a missing file, a non-GGUF or corrupt file, and an
//!   unsupported architecture as distinct [`LoadError`]s with the path; requests fail with
//!   typed [`GenerateError`]s. A panic while serving a request fails that request only.
//!
//! # Tools and structured output
//!
//! Tools are listed in the system message (appended to the caller's system message, or in a
//! new one), close to the format SmolLM2's instruction data uses:
//!
//! ```text
//! You have access to the following tools:
//! <tools>
//! {"name": "get_weather", "description": "...", "parameters": {...}}
//! </tools>
//!
//! To call tools, reply with only:
//! <tool_call>[{"name": "<tool name>", "arguments": {<arguments>}}]</tool_call>
//! If no tool is needed, or a tool has already given you what you need, answer the user directly.
//! ```
//!
//! The model's earlier calls are replayed in the same `<tool_call>[...]</tool_call>` form.
//!
//! A chat template that lists tools and renders calls itself (it reads `tools` and
//! `tool_calls`, as Qwen2.5's does) is used for that instead: the model sees the format it was
//! trained on (for Qwen, `# Tools` with `{"type": "function", "function": {...}}` lines, calls
//! as `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`, results in
//! `<tool_response>`). The tools and the calls' arguments still go in as content, tokenized
//! without special-token parsing; a template that reads the tools' fields instead of writing
//! them out whole falls back to the block above.
//! Tool results go to templates that handle the `tool` role as `tool` messages; for the others
//! (SmolLM2's included) they become one `user` message, `The add tool returned: 42`, one line
//! per result, ending with `Answer my question using this result.` — the form SmolLM2-135M
//! answers from most reliably among those tried (a `tool` turn, a `<tool_response>` block).
//!
//! Decoding is constrained by a GBNF grammar:
//!
//! - tools with [`ToolChoice::Auto`] and [`AutoToolPolicy::ModelDecides`]: *either* a
//!   `<tool_call>[...]</tool_call>` block with one call (up to four with
//!   [`GenerateRequest::parallel_tool_calls`]), each `{"name": <one of the tools>,
//!   "arguments": <valid for that tool>}`, *or* an answer (free text that does not start with
//!   `<`, `[` or `{`, nor with a ```` ```json ```` fence around a call, or JSON matching the
//!   response schema). The model's first characters pick the branch; free text is then
//!   unconstrained. The call may also take the forms models write on their own: one call object
//!   inside the tags (Qwen's template teaches
//!   `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`), the list or the object in a
//!   ```` ```json ```` fence (Qwen2.5-Coder-1.5B fenced every call), and beside a text answer a
//!   bare list or object (Qwen2.5-Coder-0.5B wrote a bare list for 5 of 23 tool prompts; as
//!   text, those calls were lost).
//! - [`ToolChoice::Required`] / [`ToolChoice::Tool`]: only the call block (of that tool).
//!   The engine writes `<tool_call>[{"name": "` itself and picks the tool whose whole name the
//!   model finds most likely at that point (a small model choosing token by token picks the
//!   wrong tool much more often); the arguments are then generated under the grammar.
//! - [`AutoToolPolicy::CallThenAnswer`]: until a tool result has come back since the last user
//!   message, the model must call one of the tools that are not [auxiliary](ToolSpec::auxiliary)
//!   *or reply directly*: "answer" is listed as one more tool, and it competes with the tools'
//!   names by the same whole-name likelihood, each taken less its likelihood for a content-free
//!   user message ("N/A"; contextual calibration). When "answer" wins the model answers in
//!   text from the end of the prompt. After a result, `None`. SmolLM2-135M cannot tell whether
//!   a tool applies (measured: left to decide it answered in text for every tool and non-tool
//!   prompt tried, and its probability of opening a call did not separate the two), so for it
//!   this is what makes tools usable; over 44 demo prompts it called the right tool for 23 of
//!   23 tool prompts and answered 14 of 21 others in text (BENCHMARKS.md).
//! - [`ToolChoice::None`]: tools are not shown; no calls. Once the conversation holds tool
//!   calls, the answer may not start with `<` (small models otherwise imitate the replayed
//!   calls and write one as text).
//! - a response schema alone: the whole answer is JSON matching it.
//!
//! The grammar is applied llama.cpp-`common_sampler`-style: a token is sampled unconstrained
//! and only checked against the grammar; only when that token is rejected is the grammar
//! applied to the rest of the vocabulary (in chunks, since llama.cpp's check allocates per
//! candidate) and the token sampled again. Greedy results are identical to grammar-first
//! sampling. Stop sequences apply to free text only: cutting a tool call or a JSON answer
//! would make it invalid.
//!
//! ## Supported JSON schema
//!
//! Grammars come from llama.cpp's `json_schema_to_grammar`, after a check that rejects what it
//! cannot enforce with [`GenerateError::UnsupportedSchema`] naming the keyword:
//!
//! - **enforced**: `type` (also arrays of types), `properties`, `required`,
//!   `additionalProperties` (boolean or schema), `items`, `prefixItems`, `minItems`, `maxItems`,
//!   `enum`, `const`, `anyOf`, `oneOf` (as `anyOf`: exclusivity is not enforced), `allOf` of
//!   object schemas, local `$ref` (`#/...`) with `$defs`/`definitions`, `minLength`,
//!   `maxLength`, `pattern` (anchored `^...$`, in the regex subset llama.cpp translates),
//!   `format` `date`/`time`/`date-time`/`uuid`, and integer `minimum`/`maximum`/
//!   `exclusiveMinimum`/`exclusiveMaximum`;
//! - **annotations, ignored**: `title`, `description`, `default`, `examples`, `$schema`, `$id`,
//!   `$comment`, `readOnly`, `writeOnly`, `deprecated`, and other `format`s (as JSON Schema
//!   2020-12 does by default; `email` is not checked);
//! - **rejected**: `not`, `if`/`then`/`else`, `multipleOf`, `uniqueItems`, `contains`,
//!   `patternProperties`, `propertyNames`, `dependentRequired`/`dependentSchemas`/
//!   `dependencies`, `minProperties`/`maxProperties`, `unevaluated*`, `additionalItems`,
//!   numeric bounds on non-integers, remote `$ref`, unanchored or untranslatable `pattern`s,
//!   `false` subschemas other than `additionalProperties: false`, and `required` names without
//!   a schema in `properties`.
//!
//! Stricter-than-the-schema behaviour: object properties come in `properties` order with the
//! required ones first, and an object with `properties` but no `additionalProperties` gets no
//! extra properties. Both still validate.

mod engine;
mod error;
mod gguf;
mod grammar;
mod output;
mod prompt;
mod request;
mod template;
mod text;

pub use engine::{Engine, EngineOptions, Generation, ModelInfo, Output};
pub use error::{GenerateError, LoadError};
pub use request::{
    AutoToolPolicy, CancelToken, ChatMessage, Completion, GenerateRequest, GenerationEvent,
    RepeatPenalty, Role, StopReason, ToolCall, ToolChoice, ToolSpec,
};
