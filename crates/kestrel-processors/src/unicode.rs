//! The unicode normalizer: one form for look-alike characters (so a filter after it sees
//! `ｐａｓｓｗｏｒｄ` as `password`), no invisible control characters, optionally tidy
//! whitespace.

use async_trait::async_trait;
use kestrel_core::processor::{
    InputArgs, OutputStepArgs, Phases, Processor, ProcessorError, ProcessorPhase,
};
use serde_json::json;
use unicode_normalization::UnicodeNormalization;

use crate::text::edit_user_text;

/// The normalization form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NormalForm {
    /// Compatibility composition: full-width letters, ligatures and the like become their
    /// plain forms (the default, Mastra's).
    #[default]
    Nfkc,
    /// Canonical composition: only combining sequences are composed.
    Nfc,
}

/// Normalizes the text of user messages (as an input processor) and of answers (as an
/// output processor).
#[derive(Debug, Clone)]
pub struct UnicodeNormalizer {
    form: NormalForm,
    strip_control: bool,
    collapse_whitespace: bool,
    trim: bool,
}

impl Default for UnicodeNormalizer {
    fn default() -> Self {
        Self::new()
    }
}

impl UnicodeNormalizer {
    /// NFKC, control characters (but newlines and tabs) and zero-width characters removed,
    /// whitespace kept as it is.
    pub fn new() -> Self {
        Self {
            form: NormalForm::Nfkc,
            strip_control: true,
            collapse_whitespace: false,
            trim: false,
        }
    }

    /// The normalization form.
    pub fn form(mut self, form: NormalForm) -> Self {
        self.form = form;
        self
    }

    /// Whether control and zero-width characters are removed (default `true`).
    pub fn strip_control(mut self, strip: bool) -> Self {
        self.strip_control = strip;
        self
    }

    /// Whether runs of spaces and tabs become one space, and of blank lines one line
    /// (default `false`).
    pub fn collapse_whitespace(mut self, collapse: bool) -> Self {
        self.collapse_whitespace = collapse;
        self
    }

    /// Whether leading and trailing whitespace is removed (default `false`).
    pub fn trim(mut self, trim: bool) -> Self {
        self.trim = trim;
        self
    }

    /// `text` normalized.
    pub fn normalize(&self, text: &str) -> String {
        let normalized: String = match self.form {
            NormalForm::Nfkc => text.nfkc().collect(),
            NormalForm::Nfc => text.nfc().collect(),
        };
        let mut out = if self.strip_control {
            normalized.chars().filter(|c| !is_invisible(*c)).collect()
        } else {
            normalized
        };
        if self.collapse_whitespace {
            out = collapse(&out);
        }
        if self.trim {
            out = out.trim().to_owned();
        }
        out
    }

    fn changed(&self, text: &str) -> Option<String> {
        let new = self.normalize(text);
        (new != text).then_some(new)
    }
}

/// Control characters other than newline, carriage return and tab, and the zero-width and
/// direction-changing characters text can hide instructions behind.
fn is_invisible(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        || matches!(
            c,
            '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
        )
}

fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_lines = 0;
    for (i, line) in text.split('\n').enumerate() {
        let words: Vec<&str> = line.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            blank_lines += 1;
            if blank_lines > 1 {
                continue;
            }
        } else {
            blank_lines = 0;
        }
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&words.join(" "));
    }
    out
}

#[async_trait]
impl Processor for UnicodeNormalizer {
    fn id(&self) -> &str {
        "unicode-normalizer"
    }

    fn name(&self) -> Option<&str> {
        Some("Unicode normalizer")
    }

    fn description(&self) -> Option<&str> {
        Some("Normalizes text (NFKC by default) and removes invisible characters")
    }

    fn phases(&self) -> Phases {
        Phases::of(&[ProcessorPhase::Input, ProcessorPhase::OutputStep])
    }

    async fn process_input(&self, args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
        let mut parts = 0;
        edit_user_text(args.messages, |text| {
            let new = self.changed(text);
            parts += usize::from(new.is_some());
            new
        });
        if parts > 0 {
            args.cx.decide("normalize", Some(json!({"parts": parts})));
        }
        Ok(())
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        if let Some(new) = self.changed(args.text) {
            *args.text = new;
            args.cx.decide("normalize", Some(json!({"parts": 1})));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn look_alikes_and_hidden_characters_go() {
        let n = UnicodeNormalizer::new();
        assert_eq!(n.normalize("ｐａｓｓｗｏｒｄ"), "password");
        assert_eq!(n.normalize("ﬁle"), "file");
        assert_eq!(n.normalize("ig\u{200B}nore\u{202E} this"), "ignore this");
        assert_eq!(n.normalize("a\tb\nc\u{7}"), "a\tb\nc");
        let tidy = UnicodeNormalizer::new()
            .collapse_whitespace(true)
            .trim(true);
        assert_eq!(tidy.normalize("  a   b\t c\n\n\n\nd  "), "a b c\n\nd");
        assert_eq!(
            UnicodeNormalizer::new()
                .form(NormalForm::Nfc)
                .normalize("ｐ"),
            "ｐ"
        );
    }
}
