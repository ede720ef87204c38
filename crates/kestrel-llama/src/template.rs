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
    /// The content, already formatted (tool calls and results as text).
    pub content: String,
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
        let env = source.and_then(|source| {
            let mut env = Environment::new();
            // What Hugging Face's `apply_chat_template` uses.
            env.set_trim_blocks(true);
            env.set_lstrip_blocks(true);
            env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
            env.add_function("raise_exception", raise_exception);
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
            env,
            bos_token,
            eos_token,
        }
    }

    /// Whether the template handles `tool` messages itself (it mentions the `tool` role).
    pub fn handles_tool_role(&self) -> bool {
        self.tool_role
    }

    /// Renders `messages` followed by the assistant generation prompt.
    pub fn render(&self, messages: &[TemplateMessage]) -> (Vec<Segment>, Rendered) {
        if let Some(env) = &self.env {
            match self.render_jinja(env, messages, false) {
                Ok(segments) => return (segments, Rendered::Model),
                Err(error) => {
                    tracing::debug!(%error, "chat template failed; retrying with tool results as user messages");
                }
            }
            if messages.iter().any(|m| m.role == "tool") {
                match self.render_jinja(env, messages, true) {
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
        tool_as_user: bool,
    ) -> Result<Vec<Segment>, String> {
        let template = env.get_template(TEMPLATE_NAME).map_err(|e| e.to_string())?;
        let placeholders: Vec<minijinja::Value> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let role = if tool_as_user && m.role == "tool" {
                    "user"
                } else {
                    m.role
                };
                minijinja::Value::from_serialize(serde_json::json!({
                    "role": role,
                    "content": placeholder(i),
                }))
            })
            .collect();
        let rendered = template
            .render(context! {
                messages => placeholders,
                add_generation_prompt => true,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| e.to_string())?;
        split_placeholders(&rendered, messages)
    }
}

fn placeholder(index: usize) -> String {
    format!("{MARK_OPEN}{index}{MARK_CLOSE}")
}

/// Splits the rendered template at the content placeholders.
fn split_placeholders(
    rendered: &str,
    messages: &[TemplateMessage],
) -> Result<Vec<Segment>, String> {
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
        let Some(message) = messages.get(index) else {
            return Err("the template altered a content placeholder".into());
        };
        push(&mut segments, &rest[..open], true);
        push(&mut segments, &message.content, false);
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
        TemplateMessage {
            role,
            content: content.into(),
        }
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

    #[test]
    fn date_conversion() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
