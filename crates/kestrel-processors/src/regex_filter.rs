//! The regex filter: named rules (and presets of them for secrets, personal data and URLs)
//! checked against the input, the answers and the tool results; what matches is blocked,
//! redacted, or let through with a warning.

use std::borrow::Cow;

use async_trait::async_trait;
use kestrel_core::processor::{
    InputArgs, OutputStepArgs, Phases, Processor, ProcessorContext, ProcessorError, ProcessorPhase,
    ToolResultArgs,
};
use regex::Regex;
use serde_json::json;

use crate::text::{edit_strings, edit_user_text};

/// What the filter does with a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterStrategy {
    /// Stop the run with a tripwire.
    Block,
    /// Replace the match with `[REDACTED:<rule>]` (the default).
    #[default]
    Redact,
    /// Let it through; report a `warn` decision and log it.
    Warn,
}

/// A preset of rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// API keys and tokens of the common providers (OpenAI, Anthropic, AWS, GitHub, Slack,
    /// Stripe, Google), private key blocks, JWTs, and `password=`/`api_key:`-style
    /// assignments.
    Secrets,
    /// E-mail addresses, phone numbers, US social security numbers, payment card numbers
    /// (Luhn-checked), IBANs, IPv4 addresses.
    Pii,
    /// `http(s)://` and `www.` addresses.
    Urls,
}

/// A check every match of a rule must pass (a card number's Luhn digit...).
pub(crate) type Check = fn(&str) -> bool;

/// A named rule: a regular expression, and optionally a check every match must pass (a
/// card number's Luhn digit...).
#[derive(Clone)]
pub struct Rule {
    name: String,
    regex: Regex,
    check: Option<Check>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("name", &self.name)
            .field("regex", &self.regex.as_str())
            .finish()
    }
}

impl Rule {
    /// The rule `name` matching `pattern` (Rust's `regex` syntax: no look-around or
    /// back-references).
    pub fn new(name: impl Into<String>, pattern: &str) -> Result<Self, RegexFilterError> {
        let name = name.into();
        let regex = Regex::new(pattern).map_err(|source| RegexFilterError::Pattern {
            rule: name.clone(),
            source: Box::new(source),
        })?;
        Ok(Self {
            name,
            regex,
            check: None,
        })
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn matches(&self, text: &str) -> Vec<(usize, usize)> {
        self.regex
            .find_iter(text)
            .filter(|m| self.check.is_none_or(|check| check(m.as_str())))
            .map(|m| (m.start(), m.end()))
            .collect()
    }
}

/// Why a rule could not be added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegexFilterError {
    /// The pattern is not a valid regular expression.
    #[error("rule {rule:?}: invalid pattern: {source}")]
    Pattern {
        /// The rule.
        rule: String,
        /// Why.
        #[source]
        source: Box<regex::Error>,
    },
}

/// A rule of a preset: `(name, pattern, check)`.
type PresetRule = (&'static str, &'static str, Option<Check>);

/// A preset's rules. The patterns are constants, compiled once per
/// filter; a test compiles every one.
fn preset_rules(preset: Preset) -> &'static [PresetRule] {
    match preset {
        Preset::Secrets => &[
            ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", None),
            (
                "openai-api-key",
                r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
                None,
            ),
            ("aws-access-key-id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
            (
                "github-token",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
                None,
            ),
            ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", None),
            ("stripe-secret-key", r"\b[rs]k_live_[0-9A-Za-z]{16,}", None),
            ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}", None),
            (
                "private-key",
                r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----",
                None,
            ),
            (
                "jwt",
                r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
                None,
            ),
            (
                "secret-assignment",
                r#"(?i)\b(?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token)\b\s*[:=]\s*["']?[^\s"']{8,}"#,
                None,
            ),
        ],
        Preset::Pii => &[
            (
                "email",
                r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
                None,
            ),
            ("us-ssn", r"\b\d{3}-\d{2}-\d{4}\b", None),
            ("credit-card", r"\b\d(?:[ -]?\d){12,18}\b", Some(luhn_valid)),
            (
                "iban",
                r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b",
                Some(iban_valid),
            ),
            ("ipv4", r"\b(?:\d{1,3}\.){3}\d{1,3}\b", Some(ipv4_valid)),
            // Last: a match that is also another kind goes to that kind.
            (
                "phone",
                r"(?:\+|\()?\b\d[\d .()-]{5,}\d\b",
                Some(phone_like),
            ),
        ],
        Preset::Urls => &[("url", r#"\b(?:https?://|www\.)[^\s<>"'`]+"#, None)],
    }
}

/// Whether `digits` (spaces and dashes allowed) pass the Luhn check.
pub(crate) fn luhn_valid(candidate: &str) -> bool {
    let digits: Vec<u32> = candidate.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                *d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Whether an IBAN candidate passes the ISO 13616 mod-97 check.
pub(crate) fn iban_valid(candidate: &str) -> bool {
    let compact: String = candidate.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.len() < 15 || compact.len() > 34 {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut remainder: u64 = 0;
    for c in tail.chars().chain(head.chars()) {
        let value = match c.to_digit(36) {
            Some(v) => v as u64,
            None => return false,
        };
        remainder = if value >= 10 {
            (remainder * 100 + value) % 97
        } else {
            (remainder * 10 + value) % 97
        };
    }
    remainder == 1
}

/// Whether a run of digits and separators is a phone number: 10 to 15 digits, or 7 to 15
/// after a `+` (shorter runs are dates, times and amounts far more often than numbers).
pub(crate) fn phone_like(candidate: &str) -> bool {
    let digits = candidate.chars().filter(char::is_ascii_digit).count();
    let least = if candidate.starts_with('+') { 7 } else { 10 };
    (least..=15).contains(&digits)
}

/// Whether every octet is at most 255.
pub(crate) fn ipv4_valid(candidate: &str) -> bool {
    candidate
        .split('.')
        .all(|o| o.parse::<u16>().is_ok_and(|n| n <= 255))
}

/// Named rules checked against text; see the [crate docs](crate).
///
/// By default it redacts, and checks the input (user messages), every answer (before it is
/// streamed or stored) and every tool result; [`RegexFilter::phases`] narrows that.
#[derive(Debug, Clone)]
pub struct RegexFilter {
    id: String,
    rules: Vec<Rule>,
    strategy: FilterStrategy,
    phases: Phases,
}

impl Default for RegexFilter {
    fn default() -> Self {
        Self::new()
    }
}

/// A match: the rule and the byte range.
struct Found<'r> {
    rule: &'r str,
    start: usize,
    end: usize,
}

impl RegexFilter {
    /// A filter without rules (add presets or rules), redacting, with the id `regex-filter`.
    pub fn new() -> Self {
        Self {
            id: "regex-filter".to_owned(),
            rules: Vec::new(),
            strategy: FilterStrategy::Redact,
            phases: Phases::of(&[
                ProcessorPhase::Input,
                ProcessorPhase::OutputStep,
                ProcessorPhase::ToolResult,
            ]),
        }
    }

    /// Another id (two filters on one agent need two).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Adds a preset's rules.
    pub fn preset(mut self, preset: Preset) -> Self {
        for (name, pattern, check) in preset_rules(preset) {
            // The presets are constants a unit test compiles: a failure here is a bug.
            if let Ok(mut rule) = Rule::new(*name, pattern) {
                rule.check = *check;
                self.rules.push(rule);
            } else {
                tracing::error!(rule = name, "a preset rule does not compile");
            }
        }
        self
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Adds the rule `name` matching `pattern`; an invalid pattern names the rule.
    pub fn pattern(self, name: impl Into<String>, pattern: &str) -> Result<Self, RegexFilterError> {
        Ok(self.rule(Rule::new(name, pattern)?))
    }

    /// What to do with a match.
    pub fn strategy(mut self, strategy: FilterStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Which hooks it checks (of input, output step and tool result).
    pub fn phases(mut self, phases: Phases) -> Self {
        self.phases = phases;
        self
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The names of the rules that match `text`, each once, in rule order.
    pub fn matching_rules(&self, text: &str) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|r| !r.matches(text).is_empty())
            .map(|r| r.name.as_str())
            .collect()
    }

    fn find(&self, text: &str) -> Vec<Found<'_>> {
        let mut found: Vec<Found<'_>> = self
            .rules
            .iter()
            .flat_map(|rule| {
                rule.matches(text).into_iter().map(|(start, end)| Found {
                    rule: &rule.name,
                    start,
                    end,
                })
            })
            .collect();
        found.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        // Overlaps: the earliest (then longest) match wins.
        let mut kept: Vec<Found<'_>> = Vec::with_capacity(found.len());
        for f in found {
            if kept.last().is_none_or(|last| f.start >= last.end) {
                kept.push(f);
            }
        }
        kept
    }

    /// `text` with every match replaced by `[REDACTED:<rule>]`, and the rules that matched.
    pub fn redact<'t>(&self, text: &'t str) -> (Cow<'t, str>, Vec<String>) {
        let found = self.find(text);
        if found.is_empty() {
            return (Cow::Borrowed(text), Vec::new());
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut rules: Vec<String> = Vec::new();
        for f in &found {
            out.push_str(&text[at..f.start]);
            out.push_str("[REDACTED:");
            out.push_str(f.rule);
            out.push(']');
            at = f.end;
            if !rules.iter().any(|r| r == f.rule) {
                rules.push(f.rule.to_owned());
            }
        }
        out.push_str(&text[at..]);
        (Cow::Owned(out), rules)
    }

    /// Applies the strategy to what `check` found in `what` (`the input`...).
    fn apply(
        &self,
        cx: &ProcessorContext<'_>,
        what: &str,
        phase: ProcessorPhase,
        rules: Vec<String>,
    ) -> Result<(), ProcessorError> {
        if rules.is_empty() {
            return Ok(());
        }
        let detail = json!({"rules": rules, "phase": phase});
        match self.strategy {
            FilterStrategy::Block => Err(ProcessorError::abort(format!(
                "{what} matched {}",
                rules.join(", ")
            ))
            .with_metadata(detail)),
            FilterStrategy::Redact => {
                cx.decide("redact", Some(detail));
                Ok(())
            }
            FilterStrategy::Warn => {
                tracing::warn!(run_id = cx.run_id, processor = %self.id, rules = ?rules, "{what} matched the filter's rules");
                cx.decide("warn", Some(detail));
                Ok(())
            }
        }
    }

    /// Checks `text` in place (redacting when that is the strategy): the rules that matched.
    fn check(&self, text: &str) -> (Option<String>, Vec<String>) {
        let (redacted, rules) = self.redact(text);
        match (self.strategy, redacted) {
            (FilterStrategy::Redact, Cow::Owned(new)) => (Some(new), rules),
            (_, _) => (None, rules),
        }
    }
}

#[async_trait]
impl Processor for RegexFilter {
    fn id(&self) -> &str {
        &self.id
    }

    fn name(&self) -> Option<&str> {
        Some("Regex filter")
    }

    fn description(&self) -> Option<&str> {
        Some("Blocks, redacts or warns on text matching its rules (secrets, personal data, URLs)")
    }

    fn phases(&self) -> Phases {
        self.phases
    }

    async fn process_input(&self, args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
        let mut rules: Vec<String> = Vec::new();
        edit_user_text(args.messages, |text| {
            let (new, found) = self.check(text);
            merge(&mut rules, found);
            new
        });
        self.apply(args.cx, "the input", ProcessorPhase::Input, rules)
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        let (new, rules) = self.check(args.text);
        if let Some(new) = new {
            *args.text = new;
        }
        self.apply(args.cx, "the answer", ProcessorPhase::OutputStep, rules)
    }

    async fn process_tool_result(
        &self,
        args: &mut ToolResultArgs<'_>,
    ) -> Result<(), ProcessorError> {
        let mut rules: Vec<String> = Vec::new();
        edit_strings(args.result, &mut |text: &str| {
            let (new, found) = self.check(text);
            merge(&mut rules, found);
            new
        });
        let what = format!("the result of {}", args.tool_name);
        self.apply(args.cx, &what, ProcessorPhase::ToolResult, rules)
    }
}

fn merge(into: &mut Vec<String>, found: Vec<String>) {
    for rule in found {
        if !into.contains(&rule) {
            into.push(rule);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn every_preset_rule_compiles() {
        for preset in [Preset::Secrets, Preset::Pii, Preset::Urls] {
            for (name, pattern, _) in preset_rules(preset) {
                Rule::new(*name, pattern).unwrap();
            }
        }
        assert_eq!(RegexFilter::new().preset(Preset::Secrets).rules().len(), 10);
    }

    #[test]
    fn the_checks_accept_real_numbers_and_refuse_lookalikes() {
        assert!(luhn_valid("4111 1111 1111 1111"));
        assert!(!luhn_valid("4111 1111 1111 1112"));
        assert!(iban_valid("GB82 WEST 1234 5698 7654 32"));
        assert!(!iban_valid("GB82 WEST 1234 5698 7654 33"));
        assert!(ipv4_valid("192.168.0.1"));
        assert!(!ipv4_valid("999.1.1.1"));
        assert!(phone_like("+1 415 555 2671"));
        assert!(phone_like("415 555 2671"));
        assert!(!phone_like("2024-01-15"));
        assert!(!phone_like("4111-1111-1111-1111"));
    }
}
