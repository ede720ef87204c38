//! Tool-call blocks parsed incrementally: the tagged, fenced and bare forms the grammar allows,
//! with argument text streamed as it is generated.

use crate::grammar::{CALLS_CLOSE, CALLS_OPEN, FENCE_CLOSE, FENCE_OPEN};
use crate::request::{GenerationEvent, StopReason};

/// The kind of a value being captured inside a call object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    String,
    Container,
    Scalar,
}

/// Where the call parser is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Before the first character: `<` opens a tagged block, `` ` `` a fenced one, `[` or `{`
    /// a bare list or a bare call.
    Start,
    /// Matching the opening literal (`<tool_call>` or ```` ```json ````); the bytes matched.
    Open(usize),
    /// After the opening literal: before `[` (a list) or `{` (one call).
    ArrayStart,
    /// Between calls: expecting `{`, `,` or `]`.
    Array,
    /// Inside a call object: expecting a key or `}`.
    Key,
    /// Reading a key string.
    KeyText { key: String, escape: bool },
    /// After a key: expecting `:`.
    Colon { key: String },
    /// After `:`: expecting a value.
    ValueStart { key: String },
    /// Reading a value.
    Value {
        key: String,
        kind: ValueKind,
        depth: usize,
        in_string: bool,
        escape: bool,
    },
    /// After a value: expecting `,` or `}`.
    AfterValue,
    /// After the calls: matching the closing literal; the number of bytes matched.
    Close(usize),
    /// The block is complete.
    Done,
}

/// Parses `<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>` incrementally,
/// and the other forms the grammar allows: one call object inside the tags, the same inside a
/// ```` ```json ```` fence, and a bare list or call. The grammar guarantees the shape, so the parser only tracks where it is.
#[derive(Debug)]
pub(super) struct CallParser {
    state: State,
    /// The opening literal and the closing one (`None` for bare calls).
    literals: Option<(&'static str, &'static str)>,
    /// Whether the calls are in a list (more may follow one).
    list: bool,
    /// Calls completed so far (also the index of the current call).
    index: usize,
    name: Option<String>,
    name_text: String,
    arguments: String,
    /// Whether `ToolCallStart` was emitted for the current call.
    started: bool,
    /// Argument text not yet emitted as a delta.
    pending: String,
}

impl Default for CallParser {
    fn default() -> Self {
        Self {
            state: State::Start,
            literals: None,
            list: true,
            index: 0,
            name: None,
            name_text: String::new(),
            arguments: String::new(),
            started: false,
            pending: String::new(),
        }
    }
}

impl CallParser {
    /// Number of completed calls.
    pub(super) fn completed(&self) -> usize {
        self.index
    }

    /// Consumes `text`; `Some(ToolCalls)` once the block is complete.
    pub(super) fn push(
        &mut self,
        text: &str,
        out: &mut Vec<GenerationEvent>,
    ) -> Option<StopReason> {
        for c in text.chars() {
            self.char(c, out);
            if self.state == State::Done {
                break;
            }
        }
        self.flush(out);
        (self.state == State::Done).then_some(StopReason::ToolCalls)
    }

    /// Emits the argument text not yet sent as a delta.
    pub(super) fn flush(&mut self, out: &mut Vec<GenerationEvent>) {
        if self.started && !self.pending.is_empty() {
            out.push(GenerationEvent::ToolCallDelta {
                index: self.index,
                delta: std::mem::take(&mut self.pending),
            });
        }
    }

    fn char(&mut self, c: char, out: &mut Vec<GenerationEvent>) {
        let state = std::mem::replace(&mut self.state, State::Done);
        self.state = match state {
            State::Start => {
                self.literals = match c {
                    '<' => Some((CALLS_OPEN, CALLS_CLOSE)),
                    '`' => Some((FENCE_OPEN, FENCE_CLOSE)),
                    _ => None,
                };
                self.state = if self.literals.is_some() {
                    State::Open(0)
                } else {
                    State::ArrayStart
                };
                return self.char(c, out);
            }
            State::Open(matched) => {
                let matched = matched + c.len_utf8();
                let open = self.literals.map_or("", |(open, _)| open);
                if matched >= open.len() {
                    State::ArrayStart
                } else {
                    State::Open(matched)
                }
            }
            State::ArrayStart => match c {
                '[' => State::Array,
                '{' => {
                    self.list = false;
                    self.start_call()
                }
                _ => State::ArrayStart,
            },
            State::Array => match c {
                '{' => self.start_call(),
                ']' => self.after_block(),
                _ => State::Array,
            },
            State::Key => match c {
                '"' => State::KeyText {
                    key: String::new(),
                    escape: false,
                },
                '}' => {
                    self.end_call(out);
                    self.after_call()
                }
                _ => State::Key,
            },
            State::KeyText { mut key, escape } => {
                if escape {
                    key.push(c);
                    State::KeyText { key, escape: false }
                } else if c == '\\' {
                    State::KeyText { key, escape: true }
                } else if c == '"' {
                    State::Colon { key }
                } else {
                    key.push(c);
                    State::KeyText { key, escape: false }
                }
            }
            State::Colon { key } => {
                if c == ':' {
                    State::ValueStart { key }
                } else {
                    State::Colon { key }
                }
            }
            State::ValueStart { key } => {
                if c.is_whitespace() {
                    State::ValueStart { key }
                } else {
                    let kind = match c {
                        '"' => ValueKind::String,
                        '{' | '[' => ValueKind::Container,
                        _ => ValueKind::Scalar,
                    };
                    self.value_char(&key, c);
                    State::Value {
                        key,
                        kind,
                        depth: usize::from(kind == ValueKind::Container),
                        in_string: kind == ValueKind::String,
                        escape: false,
                    }
                }
            }
            State::Value {
                key,
                kind,
                mut depth,
                mut in_string,
                mut escape,
            } => {
                if kind == ValueKind::Scalar && (c == ',' || c == '}' || c.is_whitespace()) {
                    self.value_end(&key, out);
                    // The terminator belongs to the object.
                    self.state = State::AfterValue;
                    return self.char(c, out);
                }
                self.value_char(&key, c);
                let mut done = false;
                if in_string {
                    if escape {
                        escape = false;
                    } else if c == '\\' {
                        escape = true;
                    } else if c == '"' {
                        in_string = false;
                        done = kind == ValueKind::String;
                    }
                } else {
                    match c {
                        '"' => in_string = true,
                        '{' | '[' => depth += 1,
                        '}' | ']' => {
                            depth = depth.saturating_sub(1);
                            done = depth == 0;
                        }
                        _ => {}
                    }
                }
                if done {
                    self.value_end(&key, out);
                    State::AfterValue
                } else {
                    State::Value {
                        key,
                        kind,
                        depth,
                        in_string,
                        escape,
                    }
                }
            }
            State::AfterValue => match c {
                ',' => State::Key,
                '}' => {
                    self.end_call(out);
                    self.after_call()
                }
                _ => State::AfterValue,
            },
            State::Close(matched) => {
                let close = self.literals.map_or("", |(_, close)| close);
                if matched == 0 && !close.starts_with(c) {
                    // Whitespace before the closing literal.
                    State::Close(0)
                } else {
                    let matched = matched + c.len_utf8();
                    if matched >= close.len() {
                        State::Done
                    } else {
                        State::Close(matched)
                    }
                }
            }
            State::Done => State::Done,
        };
    }

    /// `{` of a call object.
    fn start_call(&mut self) -> State {
        self.name = None;
        self.name_text.clear();
        self.arguments.clear();
        self.started = false;
        self.pending.clear();
        State::Key
    }

    /// Where a call's closing `}` leads: the next call of a list, or the end of the block.
    fn after_call(&self) -> State {
        if self.list {
            State::Array
        } else {
            self.after_block()
        }
    }

    /// Where the end of the calls leads: the closing literal if the block opened with one.
    fn after_block(&self) -> State {
        if self.literals.is_some() {
            State::Close(0)
        } else {
            State::Done
        }
    }

    fn value_char(&mut self, key: &str, c: char) {
        match key {
            "name" => self.name_text.push(c),
            "arguments" => {
                self.arguments.push(c);
                self.pending.push(c);
            }
            _ => {}
        }
    }

    fn value_end(&mut self, key: &str, out: &mut Vec<GenerationEvent>) {
        if key == "name" && self.name.is_none() {
            let name = serde_json::from_str::<String>(&self.name_text)
                .unwrap_or_else(|_| self.name_text.trim_matches('"').to_string());
            self.name = Some(name.clone());
            if !self.started {
                self.started = true;
                out.push(GenerationEvent::ToolCallStart {
                    index: self.index,
                    name,
                });
                // Arguments generated before the name (not the grammar's order, but possible
                // in principle) are released now.
                self.flush(out);
            }
        }
    }

    fn end_call(&mut self, out: &mut Vec<GenerationEvent>) {
        let name = self.name.clone().unwrap_or_default();
        if !self.started {
            self.started = true;
            out.push(GenerationEvent::ToolCallStart {
                index: self.index,
                name: name.clone(),
            });
        }
        self.flush(out);
        out.push(GenerationEvent::ToolCallEnd {
            index: self.index,
            name,
            arguments: std::mem::take(&mut self.arguments),
        });
        self.started = false;
        self.index += 1;
    }
}
