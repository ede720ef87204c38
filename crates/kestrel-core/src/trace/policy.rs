//! Which traces are kept ([`Sampling`]) and what a kept span may carry: sensitive values
//! redacted and large values cut ([`TracingConfig`]). Both are applied off the run, when the
//! recorder's worker takes the spans (see [`super::Tracer`]).

use super::store::Retention;
use serde_json::Value;

/// Which traces are recorded. The choice is made once per trace, from its id, so every span
/// of a trace (on every instance, after any restart) makes the same choice.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum Sampling {
    /// Every trace (the default).
    #[default]
    Always,
    /// None: tracing is off.
    Never,
    /// This share of traces, from 0.0 to 1.0.
    Ratio(f64),
}

impl Sampling {
    /// Whether the trace `trace_id` is recorded.
    pub fn keeps(self, trace_id: &str) -> bool {
        // The trace id's first 64 bits, as a fraction of the whole range (as OpenTelemetry's
        // ratio sampler does with its low bits).
        let high = trace_id
            .get(..16)
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or(0);
        self.keeps_id(u128::from(high) << 64)
    }

    /// Whether the trace whose id is `trace_id` (as a number) is recorded: what
    /// [`Sampling::keeps`] says of its hex form.
    pub fn keeps_id(self, trace_id: u128) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Ratio(ratio) if ratio >= 1.0 => true,
            Self::Ratio(ratio) if ratio.is_nan() || ratio <= 0.0 => false,
            Self::Ratio(ratio) => ((trace_id >> 64) as u64 as f64) < ratio * (u64::MAX as f64),
        }
    }
}

/// Keys whose values are redacted wherever they appear (inputs, outputs, attributes,
/// metadata), compared without case, `_`, `-` or `.`.
pub const SENSITIVE_KEYS: [&str; 14] = [
    "apikey",
    "authorization",
    "password",
    "passwd",
    "token",
    "accesstoken",
    "refreshtoken",
    "secret",
    "clientsecret",
    "privatekey",
    "cookie",
    "setcookie",
    "credential",
    "credentials",
];

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// The largest JSON a recorded input, output or attribute keeps (bytes); a larger one is cut
/// to a string of that size, marked.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 16 * 1024;

/// How an instance traces its runs. Build with [`TracingConfig::new`] (every trace, the
/// sensitive keys redacted, values cut at [`DEFAULT_MAX_VALUE_BYTES`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TracingConfig {
    /// Which traces are recorded.
    pub sampling: Sampling,
    /// Whether values under [`SENSITIVE_KEYS`] (and [`TracingConfig::sensitive_keys`]) are
    /// redacted (default: yes).
    pub redact: bool,
    /// More keys to redact, beside [`SENSITIVE_KEYS`].
    pub sensitive_keys: Vec<String>,
    /// The largest JSON an input, output or attribute keeps, in bytes.
    pub max_value_bytes: usize,
    /// The service the spans are exported as (default `kestrel`).
    pub service_name: String,
    /// How long the span store keeps traces (default [`DEFAULT_RETENTION`]): the tracer
    /// prunes it every [`PRUNE_INTERVAL`](super::recorder::PRUNE_INTERVAL).
    pub retention: Retention,
}

/// Traces kept by default: those of the last 30 days, at most 100,000.
pub const DEFAULT_RETENTION: Retention = Retention {
    max_age_ns: Some(30 * 24 * 3600 * 1_000_000_000),
    max_traces: Some(100_000),
};

impl Default for TracingConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl TracingConfig {
    /// Every trace recorded, sensitive keys redacted, values cut at
    /// [`DEFAULT_MAX_VALUE_BYTES`].
    pub fn new() -> Self {
        Self {
            sampling: Sampling::Always,
            redact: true,
            sensitive_keys: Vec::new(),
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            service_name: "kestrel".to_owned(),
            retention: DEFAULT_RETENTION,
        }
    }

    /// Records this share of traces.
    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// Redacts values under `key` too.
    pub fn sensitive_key(mut self, key: impl Into<String>) -> Self {
        self.sensitive_keys.push(normalize(&key.into()));
        self
    }

    /// Keeps sensitive values as they are (for a store nobody else reads).
    pub fn without_redaction(mut self) -> Self {
        self.redact = false;
        self
    }

    /// Cuts recorded values at `bytes` of JSON (at least 64).
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value_bytes = bytes.max(64);
        self
    }

    /// Keeps traces as `retention` says (`Retention::default()`: for ever).
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Exports the spans as `service`.
    pub fn service_name(mut self, service: impl Into<String>) -> Self {
        self.service_name = service.into();
        self
    }

    /// `value` as a span may keep it: redacted, then cut.
    pub fn sanitize(&self, value: &mut Value) {
        if self.redact {
            self.redact_in(value);
        }
        cap(value, self.max_value_bytes);
    }

    /// A recorded span as it may be kept: its input and output sanitized, each attribute
    /// redacted (under a sensitive key) or sanitized.
    pub(crate) fn sanitize_span(&self, span: &mut super::recorded::RecordedSpan) {
        use super::recorded::SpanValue;
        let sanitize = |value: &mut SpanValue| {
            let cut = match value {
                SpanValue::Value(value) => {
                    self.sanitize(value);
                    None
                }
                // Known shapes: only cut (the length of JSON text is its JSON's length).
                SpanValue::Json(json) if json.len() > self.max_value_bytes => {
                    Some(cut_json(json, self.max_value_bytes))
                }
                SpanValue::Json(_) => None,
            };
            if let Some(cut) = cut {
                *value = SpanValue::Value(Value::String(cut));
            }
        };
        for value in [&mut span.input, &mut span.output].into_iter().flatten() {
            sanitize(value);
        }
        for (key, value) in &mut span.attributes {
            if self.redact && self.is_sensitive(key) {
                *value = SpanValue::Value(Value::String(REDACTED.to_owned()));
            } else {
                sanitize(value);
            }
        }
    }

    /// A map (a caller's metadata) as a span may keep it: redacted, then each value cut.
    pub(crate) fn sanitize_map(
        &self,
        mut map: serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        for (key, value) in &mut map {
            if self.redact && self.is_sensitive(key) {
                *value = Value::String(REDACTED.to_owned());
            } else {
                self.sanitize(value);
            }
        }
        map
    }

    fn is_sensitive(&self, key: &str) -> bool {
        // This runs for every key of every recorded value: the key is normalized once, on the
        // stack, when it is short and ASCII (every sensitive key is both).
        let mut buffer = [0u8; 32];
        let mut len = 0;
        for byte in key.bytes() {
            if matches!(byte, b'_' | b'-' | b'.') {
                continue;
            }
            if !byte.is_ascii() || len == buffer.len() {
                return SENSITIVE_KEYS.iter().any(|k| same_key(key, k))
                    || self.sensitive_keys.iter().any(|k| same_key(key, k));
            }
            buffer[len] = byte.to_ascii_lowercase();
            len += 1;
        }
        let normal = &buffer[..len];
        SENSITIVE_KEYS.iter().any(|k| k.as_bytes() == normal)
            || self.sensitive_keys.iter().any(|k| k.as_bytes() == normal)
    }

    fn redact_in(&self, value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (key, field) in fields.iter_mut() {
                    if self.is_sensitive(key) {
                        *field = Value::String(REDACTED.to_owned());
                    } else {
                        self.redact_in(field);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_in(item)),
            _ => {}
        }
    }
}

/// A value serialized as a span keeps it: under a sensitive key, [`REDACTED`] (when the
/// configuration redacts). Written straight to JSON text, this records a borrowed value
/// without copying its tree.
pub(crate) struct Redacted<'a> {
    pub(crate) value: &'a Value,
    pub(crate) config: &'a TracingConfig,
}

impl serde::Serialize for Redacted<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.value {
            Value::Object(fields) if self.config.redact => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, field) in fields {
                    if self.config.is_sensitive(key) {
                        map.serialize_entry(key, REDACTED)?;
                    } else {
                        map.serialize_entry(key, &self.with(field))?;
                    }
                }
                map.end()
            }
            Value::Array(items) if self.config.redact => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&self.with(item))?;
                }
                seq.end()
            }
            other => other.serialize(serializer),
        }
    }
}

impl<'a> Redacted<'a> {
    fn with(&self, value: &'a Value) -> Self {
        Self {
            value,
            config: self.config,
        }
    }
}

/// A key as compared: lowercase, without `_`, `-` and `.`.
fn normalize(key: &str) -> String {
    normalized(key).collect()
}

fn normalized(key: &str) -> impl Iterator<Item = char> + '_ {
    key.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
}

/// Whether `key`, normalized, is `normal` (a key already normalized), without allocating.
fn same_key(key: &str, normal: &str) -> bool {
    // A normalized key is never longer than the key: most keys are told apart by length.
    if key.len() < normal.len() {
        return false;
    }
    if !key.is_ascii() {
        // Unicode's lowercase may turn a non-ASCII letter into an ASCII one (the Kelvin sign
        // into `k`): compared as chars.
        return normalized(key).eq(normal.chars());
    }
    let mut wanted = normal.bytes();
    for byte in key.bytes() {
        if matches!(byte, b'_' | b'-' | b'.') {
            continue;
        }
        if wanted.next() != Some(byte.to_ascii_lowercase()) {
            return false;
        }
    }
    wanted.next().is_none()
}

/// Cuts `value` to a string of `max` bytes of its JSON, marked, when its JSON is longer.
fn cap(value: &mut Value, max: usize) {
    // Measured first, without building the text: almost every value fits.
    if json_len(value, max) <= max {
        return;
    }
    let Ok(text) = serde_json::to_string(value) else {
        return;
    };
    *value = Value::String(cut_json(&text, max));
}

/// JSON text longer than `max` bytes as the string a span keeps: its first `max` bytes (at a
/// character boundary), marked.
fn cut_json(text: &str, max: usize) -> String {
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}… [cut: {} of {} bytes kept]",
        &text[..cut],
        cut,
        text.len()
    )
}

/// The most bytes `value`'s JSON can take (each string byte escaped as `\u0001`, each number
/// at its longest), the walk stopped once past `max`.
fn longest_json(value: &Value, max: usize) -> usize {
    let quoted = |text: &str| text.len().saturating_mul(6).saturating_add(2);
    match value {
        Value::Null | Value::Bool(_) => 5,
        // The longest `f64` or `i64` serde_json writes.
        Value::Number(_) => 24,
        Value::String(text) => quoted(text),
        Value::Array(items) => {
            let mut total = 2 + items.len();
            for item in items {
                total = total.saturating_add(longest_json(item, max));
                if total > max {
                    break;
                }
            }
            total
        }
        Value::Object(fields) => {
            let mut total = 2 + fields.len() * 2;
            for (key, field) in fields {
                total = total
                    .saturating_add(quoted(key))
                    .saturating_add(longest_json(field, max));
                if total > max {
                    break;
                }
            }
            total
        }
    }
}

/// The length of `value`'s JSON, counted up to a little past `max` (then the count stops); when
/// it surely fits, a bound on it (at most `max`).
fn json_len(value: &Value, max: usize) -> usize {
    /// Counts what serde_json writes, failing once past the limit to stop the walk.
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written += buf.len();
            if self.written > self.limit {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // The common case, without formatting: even at its longest the JSON fits.
    let bound = longest_json(value, max);
    if bound <= max {
        return bound;
    }
    let mut counter = Counter {
        written: 0,
        limit: max,
    };
    // An error here is the counter stopping past `max`.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.written
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    #[test]
    fn ratio_sampling_is_decided_by_the_trace_id() {
        let low = "0000000000000001ffffffffffffffff";
        let high = "ffffffffffffff00ffffffffffffffff";
        assert!(Sampling::Ratio(0.5).keeps(low));
        assert!(!Sampling::Ratio(0.5).keeps(high));
        assert!(Sampling::Always.keeps(high) && !Sampling::Never.keeps(low));
        assert!(!Sampling::Ratio(0.0).keeps(low) && Sampling::Ratio(1.0).keeps(high));
        assert!(!Sampling::Ratio(f64::NAN).keeps(low));
        for id in [low, high] {
            let number = u128::from_str_radix(id, 16).unwrap();
            assert_eq!(
                Sampling::Ratio(0.5).keeps_id(number),
                Sampling::Ratio(0.5).keeps(id)
            );
        }
        // About the share asked, over many traces.
        let kept = (0..10_000)
            .filter(|_| Sampling::Ratio(0.25).keeps(&super::super::new_trace_id()))
            .count();
        assert!((2_000..3_000).contains(&kept), "{kept}");
    }

    #[test]
    fn sensitive_values_are_redacted_anywhere() {
        let config = TracingConfig::new().sensitive_key("X-Team-Pin");
        let mut value = json!({
            "city": "Lisbon",
            "apiKey": "sk-1",
            "nested": [{"Authorization": "Bearer x", "access_token": "t", "keep": 1}],
            "x_team_pin": "1234"
        });
        config.sanitize(&mut value);
        assert_eq!(
            value,
            json!({
                "city": "Lisbon",
                "apiKey": REDACTED,
                "nested": [{"Authorization": REDACTED, "access_token": REDACTED, "keep": 1}],
                "x_team_pin": REDACTED
            })
        );
        let mut kept = json!({"token": "t"});
        TracingConfig::new().without_redaction().sanitize(&mut kept);
        assert_eq!(kept, json!({"token": "t"}));
    }

    #[test]
    fn large_values_are_cut_and_marked() {
        let config = TracingConfig::new().max_value_bytes(100);
        let mut value = json!({"text": "é".repeat(500)});
        config.sanitize(&mut value);
        let text = value.as_str().unwrap();
        assert!(text.len() < 200 && text.contains("[cut: "), "{text}");
        let mut small = json!({"a": 1});
        config.sanitize(&mut small);
        assert_eq!(small, json!({"a": 1}));
        // Short as text, long as JSON: what is measured is the JSON.
        let mut escaped = Value::String("\u{1}".repeat(40));
        config.sanitize(&mut escaped);
        assert!(
            escaped
                .as_str()
                .unwrap()
                .contains("[cut: 100 of 242 bytes kept]")
        );
        let mut fits = Value::String("\u{1}".repeat(10));
        config.sanitize(&mut fits);
        assert_eq!(fits, Value::String("\u{1}".repeat(10)));
        // A key is compared in place, whatever its case and separators.
        for key in [
            "API_KEY",
            "api-key",
            "Api.Key",
            "x-team-pin",
            "api\u{212A}ey",
        ] {
            let mut value = json!({ key: "v" });
            TracingConfig::new()
                .sensitive_key("X_TEAM_PIN")
                .sanitize(&mut value);
            assert_eq!(value[key], REDACTED, "{key}");
        }
        let mut kept = json!({"apiKeys2": 1, "tokens": 2, "passwordHint": 3});
        config.sanitize(&mut kept);
        assert_eq!(kept, json!({"apiKeys2": 1, "tokens": 2, "passwordHint": 3}));
    }
}
