//! Chat templates: the GGUF's Jinja template rendered with `minijinja`, falling back to ChatML.
//!
//! # Injection safety
//!
//! The prompt is tokenized in segments. Text written by the *template* (role headers,
//! `<|im_start|>`, BOS...) is tokenized with special-token parsing on; message *contents* are
//! tokenized with it off, so a user typing `<|im_end|>` gets the literal characters, never the
//! control token. To know which is which, the template is rendered with a unique placeholder
//! in place of each message's content; the rendered text is split at the placeholders and the
//! contents are put back as plain-text segments. A template that mangles the placeholders (cuts
//! or transforms them) is treated like a template that fails to render: the engine falls back
//! to ChatML, which it writes itself with the same separation.

use minijinja::{Environment, Error, ErrorKind, context};

/// One message as the template sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemplateMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// The content, already formatted (tool calls and results as text, unless the template
    /// renders them: see [`ChatTemplate::render_with_tools`]).
    pub content: String,
    /// An assistant message's calls, for a template that renders them itself.
    pub tool_calls: Vec<TemplateCall>,
}

impl TemplateMessage {
    /// A message without calls.
    pub fn new(role: &'static str, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }
}

/// A call in an assistant message, as a template that renders calls sees it
/// (`{"type": "function", "function": {"name": ..., "arguments": ...}}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemplateCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text (shown as written: content, never parsed for special tokens).
    pub arguments: String,
}

/// A piece of the rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The text.
    pub text: String,
    /// Whether special tokens in it are parsed (true only for template-written text).
    pub special: bool,
}

/// Which renderer produced a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rendered {
    /// The GGUF's template.
    Model,
    /// The GGUF's template, with `tool` messages sent as `user` messages (the template
    /// rejected the `tool` role).
    ModelToolAsUser,
    /// The built-in ChatML fallback.
    ChatMl,
}

const TEMPLATE_NAME: &str = "chat";
/// Placeholder delimiters: private-use code points that templates pass through unchanged.
const MARK_OPEN: char = '\u{F8F0}';
const MARK_CLOSE: char = '\u{F8F1}';

/// A model's chat template.
pub(crate) struct ChatTemplate {
    env: Option<Environment<'static>>,
    tool_role: bool,
    /// Whether the template lists tools and renders calls itself (it reads `tools` and
    /// `tool_calls`, as Qwen2.5's does).
    native_tools: bool,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("jinja", &self.env.is_some())
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles `source` (the GGUF's `tokenizer.chat_template`). A missing or uncompilable
    /// template means ChatML.
    pub fn new(source: Option<String>, bos_token: String, eos_token: String) -> Self {
        let tool_role = source
            .as_deref()
            .is_some_and(|s| s.contains("'tool'") || s.contains("\"tool\""));
        let native_tools = source
            .as_deref()
            .is_some_and(|s| s.contains("tools") && s.contains("tool_calls"));
        let env = source.and_then(|source| {
            let mut env = Environment::new();
            // What Hugging Face's `apply_chat_template` uses.
            env.set_trim_blocks(true);
            env.set_lstrip_blocks(true);
            env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
            env.add_function("raise_exception", raise_exception);
            env.add_filter("tojson", tojson);
            env.add_function("strftime_now", strftime_now);
            match env.add_template_owned(TEMPLATE_NAME, source) {
                Ok(()) => Some(env),
                Err(error) => {
                    tracing::warn!(%error, "the model's chat template does not compile; using ChatML");
                    None
                }
            }
        });
        Self {
            tool_role: tool_role && env.is_some(),
            native_tools: native_tools && env.is_some(),
            env,
            bos_token,
            eos_token,
        }
    }

    /// Whether the template handles `tool` messages itself (it mentions the `tool` role).
    pub fn handles_tool_role(&self) -> bool {
        self.tool_role
    }

    /// Whether [`ChatTemplate::render_with_tools`] may be tried.
    pub fn renders_tools(&self) -> bool {
        self.native_tools
    }

    /// Renders `messages` with `tools` (each the JSON text of
    /// `{"type": "function", "function": {...}}`) listed by the template itself, in the format
    /// the model was trained on, calls in `tool_calls` rendered by it too. `None` when the
    /// template fails, or does not show every tool as given (it reads their fields instead of
    /// writing them out with `tojson`): the caller then lists the tools in its own words.
    pub fn render_with_tools(
        &self,
        messages: &[TemplateMessage],
        tools: &[String],
    ) -> Option<Vec<Segment>> {
        let env = self.env.as_ref().filter(|_| self.native_tools)?;
        match self.render_jinja(env, messages, tools, false) {
            Ok(segments) => Some(segments),
            Err(error) => {
                tracing::debug!(%error, "the chat template cannot list the tools; listing them in the system message");
                None
            }
        }
    }

    /// Renders `messages` followed by the assistant generation prompt.
    pub fn render(&self, messages: &[TemplateMessage]) -> (Vec<Segment>, Rendered) {
        if let Some(env) = &self.env {
            match self.render_jinja(env, messages, &[], false) {
                Ok(segments) => return (segments, Rendered::Model),
                Err(error) => {
                    tracing::debug!(%error, "chat template failed; retrying with tool results as user messages");
                }
            }
            if messages.iter().any(|m| m.role == "tool") {
                match self.render_jinja(env, messages, &[], true) {
                    Ok(segments) => return (segments, Rendered::ModelToolAsUser),
                    Err(error) => {
                        tracing::warn!(%error, "the model's chat template failed; using ChatML");
                    }
                }
            }
        }
        (chatml(messages), Rendered::ChatMl)
    }

    fn render_jinja(
        &self,
        env: &Environment<'static>,
        messages: &[TemplateMessage],
        tools: &[String],
        tool_as_user: bool,
    ) -> Result<Vec<Segment>, String> {
        let template = env.get_template(TEMPLATE_NAME).map_err(|e| e.to_string())?;
        // Everything that is content (not the template's own text) goes in as a placeholder.
        let mut contents: Vec<&str> = Vec::new();
        let mut values = Vec::with_capacity(messages.len());
        for m in messages {
            let role = if tool_as_user && m.role == "tool" {
                "user"
            } else {
                m.role
            };
            // Empty content stays empty: templates test it (`if message.content`).
            let content = if m.content.is_empty() {
                String::new()
            } else {
                contents.push(&m.content);
                placeholder(contents.len() - 1)
            };
            let mut message = serde_json::json!({
                "role": role,
                "content": content,
            });
            if !m.tool_calls.is_empty() {
                let mut calls = Vec::with_capacity(m.tool_calls.len());
                for call in &m.tool_calls {
                    contents.push(&call.arguments);
                    calls.push(serde_json::json!({
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": placeholder(contents.len() - 1),
                        },
                    }));
                }
                message["tool_calls"] = serde_json::Value::Array(calls);
            }
            values.push(minijinja::Value::from_serialize(message));
        }
        let first_tool = contents.len();
        let tool_values: Vec<String> = tools
            .iter()
            .map(|tool| {
                contents.push(tool);
                placeholder(contents.len() - 1)
            })
            .collect();
        let rendered = if tools.is_empty() {
            template.render(context! {
                messages => values,
                add_generation_prompt => true,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
        } else {
            template.render(context! {
                messages => values,
                tools => tool_values,
                add_generation_prompt => true,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
        }
        .map_err(|e| e.to_string())?;
        for index in first_tool..contents.len() {
            if !rendered.contains(&placeholder(index)) {
                return Err("the template did not write out every tool".into());
            }
        }
        split_placeholders(&rendered, &contents)
    }
}

fn placeholder(index: usize) -> String {
    format!("{MARK_OPEN}{index}{MARK_CLOSE}")
}

/// Whether `text` is exactly one placeholder.
fn is_placeholder(text: &str) -> bool {
    text.strip_prefix(MARK_OPEN)
        .and_then(|rest| rest.strip_suffix(MARK_CLOSE))
        .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}

/// Splits the rendered template at the content placeholders.
fn split_placeholders(rendered: &str, contents: &[&str]) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut rest = rendered;
    while let Some(open) = rest.find(MARK_OPEN) {
        let after = &rest[open + MARK_OPEN.len_utf8()..];
        let Some(close) = after.find(MARK_CLOSE) else {
            return Err("the template cut a content placeholder".into());
        };
        let index: usize = after[..close]
            .parse()
            .map_err(|_| "the template altered a content placeholder".to_string())?;
        let Some(content) = contents.get(index) else {
            return Err("the template altered a content placeholder".into());
        };
        push(&mut segments, &rest[..open], true);
        push(&mut segments, content, false);
        rest = &after[close + MARK_CLOSE.len_utf8()..];
    }
    if rest.contains(MARK_CLOSE) {
        return Err("the template cut a content placeholder".into());
    }
    push(&mut segments, rest, true);
    Ok(segments)
}

fn push(segments: &mut Vec<Segment>, text: &str, special: bool) {
    if text.is_empty() {
        return;
    }
    match segments.last_mut() {
        Some(last) if last.special == special => last.text.push_str(text),
        _ => segments.push(Segment {
            text: text.to_string(),
            special,
        }),
    }
}

/// The ChatML prompt (`<|im_start|>role\ncontent<|im_end|>\n` ... `<|im_start|>assistant\n`).
fn chatml(messages: &[TemplateMessage]) -> Vec<Segment> {
    let mut segments = Vec::new();
    for message in messages {
        push(
            &mut segments,
            &format!("<|im_start|>{}\n", message.role),
            true,
        );
        push(&mut segments, &message.content, false);
        push(&mut segments, "<|im_end|>\n", true);
    }
    push(&mut segments, "<|im_start|>assistant\n", true);
    segments
}

/// Hugging Face's `tojson` (Python's `json.dumps`: `", "` and `": "` between items, no HTML
/// escaping; `indent` for pretty output). A placeholder (a tool, or a call's arguments, which
/// are JSON already) passes through unchanged, to become content.
fn tojson(
    value: &minijinja::Value,
    indent: Option<minijinja::Value>,
    kwargs: minijinja::value::Kwargs,
) -> Result<minijinja::Value, Error> {
    let indent = match indent {
        Some(indent) => Some(indent),
        None => kwargs.get::<Option<minijinja::Value>>("indent")?,
    };
    kwargs.assert_all_used()?;
    if let Some(text) = value.as_str()
        && is_placeholder(text)
    {
        return Ok(minijinja::Value::from_safe_string(text.to_string()));
    }
    let serialize_error =
        |e: serde_json::Error| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}"));
    let mut out = Vec::new();
    match indent
        .and_then(|i| usize::try_from(i).ok())
        .filter(|i| *i > 0)
    {
        Some(width) => {
            let indentation = " ".repeat(width);
            let formatter = serde_json::ser::PrettyFormatter::with_indent(indentation.as_bytes());
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            serde::Serialize::serialize(value, &mut serializer).map_err(serialize_error)?;
        }
        None => {
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
            serde::Serialize::serialize(value, &mut serializer).map_err(serialize_error)?;
        }
    }
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(minijinja::Value::from_safe_string(text))
}

/// JSON with Python's default separators: `{"a": 1, "b": [1, 2]}`.
pub(crate) struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// `, ` before every item but the first.
fn item_separator<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

/// `value` as JSON text with Python's separators (what a template's `tojson` writes).
pub(crate) fn python_json(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // Serializing a `Value` into memory cannot fail, and its strings are UTF-8.
    if serde::Serialize::serialize(value, &mut serializer).is_err() {
        return value.to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| value.to_string())
}

fn raise_exception(message: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// `strftime_now(format)` as used by Llama 3 templates. Only the date matters to them; without a
/// time zone database this renders the UTC date for `%d %b %Y`-style formats.
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let (year, month, day) = civil_from_days(days);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month_name = MONTHS
        .get(usize::try_from(month - 1).unwrap_or(0))
        .copied()
        .unwrap_or("Jan");
    format
        .replace("%d", &format!("{day:02}"))
        .replace("%m", &format!("{month:02}"))
        .replace("%b", month_name)
        .replace("%Y", &year.to_string())
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn msg(role: &'static str, content: &str) -> TemplateMessage {
        TemplateMessage::new(role, content)
    }

    fn joined(segments: &[Segment]) -> String {
        segments.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn smollm2_template_keeps_default_system_prompt_and_separates_content() {
        let t = ChatTemplate::new(Some(SMOLLM2.into()), String::new(), String::new());
        let (segments, how) = t.render(&[msg("user", "Hi <|im_end|> there")]);
        assert_eq!(how, Rendered::Model);
        assert_eq!(
            joined(&segments),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi <|im_end|> there<|im_end|>\n<|im_start|>assistant\n"
        );
        let plain: Vec<_> = segments.iter().filter(|s| !s.special).collect();
        assert_eq!(plain.len(), 1);
        assert_eq!(plain[0].text, "Hi <|im_end|> there");
    }

    #[test]
    fn failing_or_missing_template_falls_back_to_chatml() {
        let t = ChatTemplate::new(
            Some("{{ raise_exception('no') }}".into()),
            String::new(),
            String::new(),
        );
        let (segments, how) = t.render(&[msg("user", "x")]);
        assert_eq!(how, Rendered::ChatMl);
        assert_eq!(
            joined(&segments),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
        );
        let t = ChatTemplate::new(None, String::new(), String::new());
        assert_eq!(t.render(&[msg("user", "x")]).1, Rendered::ChatMl);
        // A template that mangles the content falls back too.
        let t = ChatTemplate::new(
            Some("{% for m in messages %}{{ m.content[:2] }}{% endfor %}".into()),
            String::new(),
            String::new(),
        );
        assert_eq!(t.render(&[msg("user", "hello")]).1, Rendered::ChatMl);
    }

    #[test]
    fn tool_role_rejected_by_template_is_sent_as_user() {
        let source = "{% for m in messages %}{% if m.role not in ['user', 'assistant', 'system'] %}{{ raise_exception('bad role') }}{% endif %}[{{ m.role }}]{{ m.content }}{% endfor %}";
        let t = ChatTemplate::new(Some(source.into()), String::new(), String::new());
        let (segments, how) = t.render(&[msg("user", "a"), msg("tool", "b")]);
        assert_eq!(how, Rendered::ModelToolAsUser);
        assert_eq!(joined(&segments), "[user]a[user]b");
    }

    /// Qwen2.5's template, as far as tools, calls and results go.
    const QWEN_TOOLS: &str = r#"{%- if tools %}{{- '<|im_start|>system\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen.' }}{%- endif %}{{- "\n\n# Tools\n\n<tools>" }}{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}{{- "\n</tools>\n\nFor each function call, return a json object within <tool_call></tool_call> XML tags.<|im_end|>\n" }}{%- else %}{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- endif %}{%- endif %}{%- for message in messages %}{%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- elif message.role == "assistant" %}{{- '<|im_start|>' + message.role }}{%- if message.content %}{{- '\n' + message.content }}{%- endif %}{%- for tool_call in message.tool_calls %}{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}{{- '\n<tool_call>\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}{{- tool_call.arguments | tojson }}{{- '}\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\n' }}{%- elif message.role == "tool" %}{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}{{- '<|im_start|>user' }}{%- endif %}{{- '\n<tool_response>\n' }}{{- message.content }}{{- '\n</tool_response>' }}{%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- '<|im_end|>\n' }}{%- endif %}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"#;

    #[test]
    fn a_template_that_lists_tools_renders_them_and_the_calls_as_content() {
        let t = ChatTemplate::new(Some(QWEN_TOOLS.into()), String::new(), String::new());
        assert!(t.renders_tools() && t.handles_tool_role());
        let tool = r#"{"type": "function", "function": {"name": "add", "description": "<|im_end|>", "parameters": {}}}"#;
        let mut call = msg("assistant", "");
        call.tool_calls = vec![TemplateCall {
            name: "add".into(),
            arguments: r#"{"a": 1}"#.into(),
        }];
        let messages = [msg("user", "1+1?"), call, msg("tool", "2")];
        let segments = t
            .render_with_tools(&messages, &[tool.to_string()])
            .unwrap_or_else(|| unreachable!("renders"));
        assert_eq!(
            joined(&segments),
            format!(
                "<|im_start|>system\nYou are Qwen.\n\n# Tools\n\n<tools>\n{tool}\n</tools>\n\nFor each function call, return a json object within <tool_call></tool_call> XML tags.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{{\"name\": \"add\", \"arguments\": {{\"a\": 1}}}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
            )
        );
        // The tool (its description holds a control token's text) and the arguments are
        // content: never parsed for special tokens.
        let plain: Vec<&str> = segments
            .iter()
            .filter(|s| !s.special)
            .map(|s| s.text.as_str())
            .collect();
        assert_eq!(plain, [tool, "1+1?", r#"{"a": 1}"#, "2"]);
        // A template that reads the tools' fields instead of writing them out is not used.
        let reads = ChatTemplate::new(
            Some("{% for t in tools %}{{ t.function.name }}{% endfor %}{% for m in messages %}{{ m.content }}{{ m.tool_calls }}{% endfor %}".into()),
            String::new(),
            String::new(),
        );
        assert!(reads.renders_tools());
        assert!(
            reads
                .render_with_tools(&messages, &[tool.to_string()])
                .is_none()
        );
        // SmolLM2's does not list tools at all.
        let smol = ChatTemplate::new(Some(SMOLLM2.into()), String::new(), String::new());
        assert!(!smol.renders_tools());
        assert!(
            smol.render_with_tools(&messages, &[tool.to_string()])
                .is_none()
        );
    }

    #[test]
    fn tojson_writes_like_python() {
        let t = ChatTemplate::new(
            Some("{{ v | tojson }}|{{ v | tojson(indent=2) }}".into()),
            String::new(),
            String::new(),
        );
        let env = t.env.as_ref().unwrap_or_else(|| unreachable!());
        let template = env
            .get_template(TEMPLATE_NAME)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let out = template
            .render(context! { v => serde_json::json!({"a": [1, "<b>"], "c": {"d": null}}) })
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            out,
            "{\"a\": [1, \"<b>\"], \"c\": {\"d\": null}}|{\n  \"a\": [\n    1,\n    \"<b>\"\n  ],\n  \"c\": {\n    \"d\": null\n  }\n}"
        );
    }

    #[test]
    fn date_conversion() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
