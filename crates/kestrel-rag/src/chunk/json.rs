//! The json strategy: Mastra's recursive JSON splitter. The document is parsed, and its
//! values are grouped into JSON objects of at most `maxSize` characters (as
//! `JSON.stringify` writes them) that keep their path from the top: `{"members": [..]}`,
//! `{"society": {"name": ..}}`. An object or array too large is cut between its entries
//! (objects recursively; array items that are objects too, under a key that is the number of
//! chunks made so far, as Mastra does); a top-level string too large is cut at spaces.
//! Top-level primitives are gathered in one chunk, emitted when the next would not fit or
//! last. `convertLists` turns arrays into objects keyed `"0"`, `"1"`...; `ensureAscii`
//! (default true) writes non-ASCII characters as `\uXXXX` inside the strings' text (so the
//! chunk's JSON holds `\\u00e9`, as Mastra's does). `overlap` does not apply.
//!
//! The values are JavaScript's: numbers are doubles written as JavaScript writes them, and an
//! object's keys keep JavaScript's order (integer-like keys first, ascending, then the rest
//! in insertion order), so the chunks are Mastra's text exactly.

use std::fmt::Write as _;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::ChunkError;

/// How deep objects are cut before the rest is kept whole (Mastra's `maxDepth`).
const MAX_DEPTH: usize = 100;

/// A JavaScript value parsed from JSON.
#[derive(Debug, Clone, PartialEq)]
enum Js {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Js>),
    Object(Object),
}

/// A JavaScript object: its entries in JavaScript's key order.
#[derive(Debug, Clone, PartialEq, Default)]
struct Object(Vec<(String, Js)>);

/// Whether `key` is an array index, which JavaScript orders first, by value.
fn index_key(key: &str) -> Option<u32> {
    let n: u32 = key.parse().ok()?;
    (n != u32::MAX && n.to_string() == key).then_some(n)
}

impl Object {
    /// Sets `key` (in place when present; else where JavaScript puts a new key).
    fn set(&mut self, key: String, value: Js) {
        if let Some(entry) = self.0.iter_mut().find(|(k, _)| *k == key) {
            entry.1 = value;
            return;
        }
        let at = match index_key(&key) {
            Some(n) => self
                .0
                .iter()
                .position(|(k, _)| index_key(k).is_none_or(|m| m > n))
                .unwrap_or(self.0.len()),
            None => self.0.len(),
        };
        self.0.insert(at, (key, value));
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Js> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Js {
    /// `Object.entries`: an object's entries, an array's items keyed by index.
    fn entries(&self) -> Vec<(String, Js)> {
        match self {
            Self::Object(object) => object.0.clone(),
            Self::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn is_object_like(&self) -> bool {
        matches!(self, Self::Object(_) | Self::Array(_))
    }

    /// JavaScript's falsiness (what `!data` tests).
    fn is_falsy(&self) -> bool {
        match self {
            Self::Null => true,
            Self::Bool(b) => !b,
            Self::Number(n) => *n == 0.0 || n.is_nan(),
            Self::String(s) => s.is_empty(),
            _ => false,
        }
    }
}

impl<'de> Deserialize<'de> for Js {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Expect;
        impl<'de> Visitor<'de> for Expect {
            type Value = Js;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Js, E> {
                Ok(Js::Null)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Js, E> {
                Ok(Js::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Js, E> {
                Ok(Js::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Js, E> {
                Ok(Js::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Js, E> {
                Ok(Js::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Js, E> {
                Ok(Js::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Js, E> {
                Ok(Js::String(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Js, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Js::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Js, A::Error> {
                let mut object = Object::default();
                while let Some((key, value)) = map.next_entry::<String, Js>()? {
                    object.set(key, value);
                }
                Ok(Js::Object(object))
            }
        }
        deserializer.deserialize_any(Expect)
    }
}

/// How strings are written.
#[derive(Clone, Copy, PartialEq)]
enum Strings {
    /// As `JSON.stringify` writes them.
    Plain,
    /// Non-ASCII UTF-16 units as the text `\uXXXX` (Mastra's `escapeNonAscii`), then as
    /// `JSON.stringify` writes that.
    Ascii,
    /// The text `\uXXXX` in a string turned back into its character first (what Mastra does
    /// without `ensureAscii`).
    Unescaped,
}

/// `value` as `JSON.stringify` writes it.
fn stringify(value: &Js, strings: Strings) -> String {
    let mut out = String::new();
    write_value(&mut out, value, strings);
    out
}

fn write_value(out: &mut String, value: &Js, strings: Strings) {
    match value {
        Js::Null => out.push_str("null"),
        Js::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Js::Number(n) => write_number(out, *n),
        Js::String(s) => write_string(out, s, strings),
        Js::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, strings);
            }
            out.push(']');
        }
        Js::Object(object) => write_object(out, object, strings),
    }
}

fn write_object(out: &mut String, object: &Object, strings: Strings) {
    out.push('{');
    for (i, (key, item)) in object.0.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Keys are never escaped nor unescaped (as in Mastra).
        write_string(out, key, Strings::Plain);
        out.push(':');
        write_value(out, item, strings);
    }
    out.push('}');
}

/// A number as JavaScript writes it (`1`, `0.5`, `1e+21`, `1e-7`; `null` when not finite).
fn write_number(out: &mut String, n: f64) {
    if !n.is_finite() {
        out.push_str("null");
        return;
    }
    if n == 0.0 {
        out.push('0');
        return;
    }
    let magnitude = n.abs();
    if (1e-6..1e21).contains(&magnitude) {
        // Rust's shortest round-trip digits, without an exponent in this range.
        let _ = write!(out, "{n}");
        return;
    }
    // `1.5e21` in Rust, `1.5e+21` in JavaScript.
    let text = format!("{n:e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if !exponent.starts_with('-') => {
            let _ = write!(out, "{mantissa}e+{exponent}");
        }
        _ => out.push_str(&text),
    }
}

/// A string's UTF-16 units as `JSON.stringify` writes them.
fn write_units(out: &mut String, units: &[u16]) {
    out.push('"');
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok('\n') => out.push_str("\\n"),
            Ok('\r') => out.push_str("\\r"),
            Ok('\t') => out.push_str("\\t"),
            Ok('\u{8}') => out.push_str("\\b"),
            Ok('\u{c}') => out.push_str("\\f"),
            Ok(c) if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            Ok(c) => out.push(c),
            // A lone surrogate.
            Err(e) => {
                let _ = write!(out, "\\u{:04x}", e.unpaired_surrogate());
            }
        }
    }
    out.push('"');
}

fn write_string(out: &mut String, s: &str, strings: Strings) {
    let units: Vec<u16> = match strings {
        Strings::Plain => s.encode_utf16().collect(),
        Strings::Ascii => {
            let mut escaped = String::with_capacity(s.len());
            for unit in s.encode_utf16() {
                if unit >= 0x80 {
                    let _ = write!(escaped, "\\u{unit:04x}");
                } else {
                    escaped.push(char::from(unit as u8));
                }
            }
            escaped.encode_utf16().collect()
        }
        Strings::Unescaped => unescape(s),
    };
    write_units(out, &units);
}

/// `s` with each `\uXXXX` text (any case of hex) turned into that UTF-16 unit.
fn unescape(s: &str) -> Vec<u16> {
    let units: Vec<u16> = s.encode_utf16().collect();
    let mut out = Vec::with_capacity(units.len());
    let mut i = 0;
    while i < units.len() {
        if units[i] == u16::from(b'\\')
            && units.get(i + 1) == Some(&u16::from(b'u'))
            && let Some(hex) = units.get(i + 2..i + 6)
            && let Ok(text) = String::from_utf16(hex)
            && text.bytes().all(|b| b.is_ascii_hexdigit())
            && let Ok(unit) = u16::from_str_radix(&text, 16)
        {
            out.push(unit);
            i += 6;
            continue;
        }
        out.push(units[i]);
        i += 1;
    }
    out
}

/// The length of `value`'s JSON text, in UTF-16 units (Mastra's `jsonSize`).
fn json_size(value: &Js) -> usize {
    stringify(value, Strings::Plain).encode_utf16().count()
}

/// The splitter's settings.
pub(crate) struct Rules {
    /// The largest chunk, in characters of JSON text.
    pub max_size: usize,
    /// A partial group is only emitted when at least this large (default
    /// `max(maxSize - 200, 50)`).
    pub min_size: usize,
    /// Write non-ASCII characters as `\uXXXX` text.
    pub ensure_ascii: bool,
    /// Turn arrays into objects keyed by index first.
    pub convert_lists: bool,
}

/// `text` (a JSON document) cut into JSON texts.
pub(crate) fn split(text: &str, rules: &Rules) -> Result<Vec<String>, ChunkError> {
    let data: Js = serde_json::from_str(text).map_err(|e| ChunkError::InvalidJson {
        message: e.to_string(),
    })?;
    let data = if rules.convert_lists {
        lists_to_objects(data)
    } else {
        data
    };
    let strings = if rules.ensure_ascii {
        Strings::Ascii
    } else {
        Strings::Unescaped
    };
    Ok(Splitter { rules }
        .split(&data)
        .iter()
        .map(|chunk| stringify(chunk, strings))
        .collect())
}

/// Arrays as objects keyed `"0"`, `"1"`..., all the way down.
fn lists_to_objects(value: Js) -> Js {
    match value {
        Js::Array(items) => {
            let mut object = Object::default();
            for (i, item) in items.into_iter().enumerate() {
                object.set(i.to_string(), lists_to_objects(item));
            }
            Js::Object(object)
        }
        Js::Object(object) => {
            let mut converted = Object::default();
            for (key, item) in object.0 {
                converted.set(key, lists_to_objects(item));
            }
            Js::Object(converted)
        }
        other => other,
    }
}

/// `value` under `path` (`["a", "b"]`: `{"a": {"b": value}}`); a path starting at `"root"`
/// gives what is under it (Mastra's `createChunk`).
fn nest(value: Js, path: &[String]) -> Js {
    let mut chunk = Object::default();
    if let Some((last, parents)) = path.split_last() {
        let mut current = &mut chunk;
        for key in parents {
            if current.get_mut(key).is_none_or(|v| v.is_falsy()) {
                current.set(key.clone(), Js::Object(Object::default()));
            }
            current = match current.get_mut(key) {
                Some(Js::Object(inner)) => inner,
                // Not an object: JavaScript would set a property nobody reads; stop here.
                _ => return Js::Object(chunk),
            };
        }
        current.set(last.clone(), value);
    }
    match chunk.get_mut("root") {
        Some(root) if !root.is_falsy() => root.clone(),
        _ => Js::Object(chunk),
    }
}

/// An object with no keys (or a chunk that is not an object, which Mastra counts as such).
fn is_empty_chunk(chunk: &Js) -> bool {
    match chunk {
        Js::Object(object) => object.is_empty(),
        Js::Array(items) => items.is_empty(),
        _ => true,
    }
}

struct Splitter<'r> {
    rules: &'r Rules,
}

impl Splitter<'_> {
    fn fits(&self, value: &Js) -> bool {
        json_size(value) <= self.rules.max_size
    }

    fn fits_object(&self, object: &Object) -> bool {
        let mut text = String::new();
        write_object(&mut text, object, Strings::Plain);
        text.encode_utf16().count() <= self.rules.max_size
    }

    /// Mastra's `splitJson`: the top level's entries.
    fn split(&self, data: &Js) -> Vec<Js> {
        // `[{}]`: Mastra starts from one empty chunk, dropped at the end.
        let mut chunks: Vec<Js> = Vec::new();
        if data.is_falsy() || !data.is_object_like() {
            return chunks;
        }
        let mut current = Object::default();
        for (key, value) in data.entries() {
            match &value {
                Js::Array(items) => chunks.extend(self.array(items, &key, &[], 0)),
                Js::Object(_) => chunks.extend(self.object(&value, &[key], 0)),
                _ => self.primitive(value, key, &mut current, &mut chunks),
            }
        }
        if !current.is_empty() {
            chunks.push(Js::Object(current));
        }
        chunks.retain(|chunk| !is_empty_chunk(chunk));
        chunks
    }

    /// A top-level primitive: into the gathered chunk, or a new one; a string too large for
    /// any is cut at spaces.
    fn primitive(&self, value: Js, key: String, current: &mut Object, chunks: &mut Vec<Js>) {
        let mut alone = Object::default();
        alone.set(key.clone(), value.clone());
        if self.fits_object(&alone) {
            let mut with = current.clone();
            with.set(key, value);
            if self.fits_object(&with) {
                *current = with;
            } else {
                chunks.push(Js::Object(std::mem::replace(current, alone)));
            }
            return;
        }
        let path = [key];
        if let Js::String(text) = &value {
            for piece in self.long_string(text) {
                let chunk = nest(Js::String(piece), &path);
                if self.fits(&chunk) {
                    chunks.push(chunk);
                }
            }
            return;
        }
        let chunk = nest(value, &path);
        if self.fits(&chunk) {
            chunks.push(chunk);
        }
    }

    /// A string cut at the last space before `maxSize - 20` characters (or at that length).
    fn long_string(&self, value: &str) -> Vec<String> {
        let units: Vec<u16> = value.encode_utf16().collect();
        let size = self.rules.max_size.saturating_sub(20);
        let mut pieces = Vec::new();
        let mut rest = &units[..];
        while !rest.is_empty() {
            if rest.len() <= size {
                pieces.push(String::from_utf16_lossy(rest));
                break;
            }
            let last_space = rest[..size].iter().rposition(|&u| u == u16::from(b' '));
            let at = match last_space {
                Some(i) if i > 0 => i + 1,
                _ => size,
            };
            if at == 0 {
                // `maxSize` 20 or less: Mastra would loop for ever; one unit at a time.
                pieces.push(String::from_utf16_lossy(&rest[..1]));
                rest = &rest[1..];
                continue;
            }
            pieces.push(String::from_utf16_lossy(&rest[..at]));
            rest = &rest[at..];
        }
        pieces
    }

    /// Mastra's `handleArray`: `items` (under `key`, below `parent`) whole, or in groups.
    fn array(&self, items: &[Js], key: &str, parent: &[String], depth: usize) -> Vec<Js> {
        let path: Vec<String> = if parent.is_empty() {
            vec!["root".to_owned(), key.to_owned()]
        } else {
            let mut path = parent.to_vec();
            path.push(key.to_owned());
            path
        };
        let whole = nest(Js::Array(items.to_vec()), &path);
        if self.fits(&whole) {
            return vec![whole];
        }
        let mut chunks = Vec::new();
        let mut group: Vec<Js> = Vec::new();
        let save = |group: &mut Vec<Js>, chunks: &mut Vec<Js>| {
            if group.is_empty() {
                return;
            }
            let chunk = nest(Js::Array(group.clone()), &path);
            if json_size(&chunk) >= self.rules.min_size {
                chunks.push(chunk);
                group.clear();
            }
        };
        for item in items {
            let mut with = group.clone();
            with.push(item.clone());
            if self.fits(&nest(Js::Array(with.clone()), &path)) {
                group = with;
                continue;
            }
            save(&mut group, &mut chunks);
            if item.is_object_like() {
                let single = vec![item.clone()];
                if self.fits(&nest(Js::Array(single.clone()), &path)) {
                    group = single;
                } else {
                    let mut item_path = path.clone();
                    item_path.push(chunks.len().to_string());
                    chunks.extend(self.object(item, &item_path, depth + 1));
                }
            } else {
                group = vec![item.clone()];
            }
        }
        save(&mut group, &mut chunks);
        chunks
    }

    /// Mastra's `handleNestedObject`: `value` (at `path`) whole, or cut between its entries.
    fn object(&self, value: &Js, path: &[String], depth: usize) -> Vec<Js> {
        let path: Vec<String> = if path.is_empty() {
            vec!["root".to_owned()]
        } else {
            path.to_vec()
        };
        let whole = nest(value.clone(), &path);
        if depth > MAX_DEPTH || self.fits(&whole) {
            return vec![whole];
        }
        let mut chunks = Vec::new();
        let mut current = Object::default();
        let save = |current: &mut Object, chunks: &mut Vec<Js>| {
            if current.is_empty() {
                return;
            }
            let chunk = nest(Js::Object(current.clone()), &path);
            if json_size(&chunk) >= self.rules.min_size {
                chunks.push(chunk);
                *current = Object::default();
            }
        };
        for (key, item) in value.entries() {
            if let Js::Array(items) = &item {
                save(&mut current, &mut chunks);
                chunks.extend(self.array(items, &key, &path, depth));
                continue;
            }
            let mut with = current.clone();
            with.set(key.clone(), item.clone());
            if self.fits(&nest(Js::Object(with.clone()), &path)) {
                current = with;
                continue;
            }
            save(&mut current, &mut chunks);
            if item.is_object_like() {
                let mut inner = path.clone();
                inner.push(key);
                chunks.extend(self.object(&item, &inner, depth + 1));
            } else {
                current = Object::default();
                current.set(key, item);
            }
        }
        save(&mut current, &mut chunks);
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_javascript_writes_them() {
        let cases = [
            (1.0, "1"),
            (-0.5, "-0.5"),
            (8412.0, "8412"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123456789012345680000.0, "123456789012345680000"),
        ];
        for (n, text) in cases {
            assert_eq!(stringify(&Js::Number(n), Strings::Plain), text);
        }
    }

    #[test]
    fn integer_like_keys_come_first() {
        let value: Result<Js, _> = serde_json::from_str(r#"{"b":1,"2":2,"a":3,"1":4,"01":5}"#);
        assert!(
            matches!(value, Ok(ref v) if stringify(v, Strings::Plain) == r#"{"1":4,"2":2,"b":1,"a":3,"01":5}"#),
            "{value:?}"
        );
    }

    #[test]
    fn ascii_escapes_are_text_in_the_string() {
        let value = Js::String("café 🐦".to_owned());
        assert_eq!(
            stringify(&value, Strings::Ascii),
            r#""caf\\u00e9 \\ud83d\\udc26""#
        );
        let value = Js::String("caf\\u00E9".to_owned());
        assert_eq!(stringify(&value, Strings::Unescaped), "\"café\"");
    }
}
