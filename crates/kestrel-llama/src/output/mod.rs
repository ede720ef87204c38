//! Turning generated text into events: free text (with stop sequences), JSON answers, and tool
//! call blocks parsed incrementally so that argument text streams as it is generated.

mod calls;

use crate::grammar::{Answer, FENCE_OPEN, MAX_CALL_BLANKS};
use crate::request::{GenerationEvent, StopReason};
use crate::text::{StopMatcher, StopScan};

use calls::CallParser;

/// Which branch of the grammar the output took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Branch {
    /// A tool-call block.
    Calls,
    /// The answer (free text or JSON).
    Answer,
}

/// Routes generated text to events.
#[derive(Debug)]
pub(crate) struct OutputRouter {
    calls_allowed: bool,
    answer: Answer,
    branch: Option<Branch>,
    /// Text held while the branch is undecided: the start of a fence that may open calls.
    held: String,
    stops: StopMatcher,
    json: JsonEnd,
    calls: CallParser,
}

impl OutputRouter {
    pub fn new(calls_allowed: bool, answer: Answer, stop: &[String]) -> Self {
        Self {
            calls_allowed,
            answer,
            branch: None,
            held: String::new(),
            stops: StopMatcher::new(stop),
            json: JsonEnd::default(),
            calls: CallParser::default(),
        }
    }

    /// Whether the output is free text from now on (so the grammar can be dropped).
    pub fn is_free_text(&self) -> bool {
        self.branch == Some(Branch::Answer) && self.answer == Answer::Text
    }

    /// Whether no text has decided the branch yet (nothing generated, only tokens that render
    /// as nothing, or the start of a fence).
    pub fn is_undecided(&self) -> bool {
        self.branch.is_none()
    }

    /// Consumes `text`, appending events to `out`. Returns `Some(reason)` when the output is
    /// complete.
    pub fn push(&mut self, text: &str, out: &mut Vec<GenerationEvent>) -> Option<StopReason> {
        if text.is_empty() {
            return None;
        }
        let held;
        let (branch, text) = match self.branch {
            Some(branch) => (branch, text),
            None => {
                self.held.push_str(text);
                // Still undecided: the text is held, and nothing is complete.
                let branch = self.decide()?;
                self.branch = Some(branch);
                held = std::mem::take(&mut self.held);
                (branch, held.as_str())
            }
        };
        match (branch, self.answer) {
            (Branch::Calls, _) => self.calls.push(text, out),
            (Branch::Answer, Answer::Json) => {
                out.push(GenerationEvent::Text(text.to_string()));
                self.json.push(text).then_some(StopReason::EndOfTurn)
            }
            (Branch::Answer, _) => match self.stops.push(text) {
                StopScan::Continue(release) => {
                    if !release.is_empty() {
                        out.push(GenerationEvent::Text(release));
                    }
                    None
                }
                StopScan::Stopped(release) => {
                    if !release.is_empty() {
                        out.push(GenerationEvent::Text(release));
                    }
                    Some(StopReason::StopSequence)
                }
            },
        }
    }

    /// Decides the branch from the text held so far, or `None` while it may still go either way.
    ///
    /// The grammar makes the first characters decide: only a tool-call block starts with `<`,
    /// beside a text answer only a bare call with `[` or `{`, and a ```` ```json ```` fence
    /// opens calls when `[` or `{` follows it after at most [`MAX_CALL_BLANKS`] blanks.
    fn decide(&self) -> Option<Branch> {
        if !self.calls_allowed {
            return Some(Branch::Answer);
        }
        if self.answer == Answer::None {
            return Some(Branch::Calls);
        }
        let text = self.held.as_str();
        if text.starts_with('<') {
            return Some(Branch::Calls);
        }
        if self.answer == Answer::Json {
            // A JSON value never starts with a backtick.
            return Some(if text.starts_with('`') {
                Branch::Calls
            } else {
                Branch::Answer
            });
        }
        if text.starts_with(['[', '{']) {
            return Some(Branch::Calls);
        }
        let Some(after) = text.strip_prefix(FENCE_OPEN) else {
            return if FENCE_OPEN.starts_with(text) {
                None
            } else {
                Some(Branch::Answer)
            };
        };
        let blanks = after
            .chars()
            .take_while(|c| matches!(c, ' ' | '\n'))
            .count();
        match after.chars().nth(blanks.min(MAX_CALL_BLANKS)) {
            None => None,
            Some('[' | '{') if blanks <= MAX_CALL_BLANKS => Some(Branch::Calls),
            Some(_) => Some(Branch::Answer),
        }
    }

    /// Flushes held-back text at the end of generation.
    pub fn finish(&mut self, out: &mut Vec<GenerationEvent>) {
        if self.branch.is_none() && !self.held.is_empty() {
            // Generation ended while the start was ambiguous: it was text.
            self.branch = Some(Branch::Answer);
            let held = std::mem::take(&mut self.held);
            let _ = self.push(&held, out);
        }
        if self.branch == Some(Branch::Answer) && self.answer != Answer::Json {
            let rest = self.stops.finish();
            if !rest.is_empty() {
                out.push(GenerationEvent::Text(rest));
            }
        }
        if self.branch == Some(Branch::Calls) {
            self.calls.flush(out);
        }
    }

    /// Number of completed tool calls.
    pub fn completed_calls(&self) -> usize {
        self.calls.completed()
    }
}

/// Detects the end of a JSON value (object, array or string) streamed as text.
#[derive(Debug, Default)]
struct JsonEnd {
    started: bool,
    depth: usize,
    in_string: bool,
    escape: bool,
    /// Whether the top-level value is a string.
    top_string: bool,
    done: bool,
}

impl JsonEnd {
    /// Returns true once the top-level value is complete.
    fn push(&mut self, text: &str) -> bool {
        for c in text.chars() {
            if self.done {
                break;
            }
            if !self.started {
                match c {
                    '{' | '[' => {
                        self.started = true;
                        self.depth = 1;
                    }
                    '"' => {
                        self.started = true;
                        self.top_string = true;
                        self.in_string = true;
                    }
                    c if c.is_whitespace() => {}
                    // A number, `true`, `false` or `null`: its end is only known at the end of
                    // generation.
                    _ => self.started = true,
                }
                continue;
            }
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if c == '\\' {
                    self.escape = true;
                } else if c == '"' {
                    self.in_string = false;
                    if self.top_string {
                        self.done = true;
                    }
                }
                continue;
            }
            match c {
                '"' => self.in_string = true,
                '{' | '[' => self.depth += 1,
                '}' | ']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.done = true;
                    }
                }
                _ => {}
            }
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        router: &mut OutputRouter,
        pieces: &[&str],
    ) -> (Vec<GenerationEvent>, Option<StopReason>) {
        let mut out = Vec::new();
        for piece in pieces {
            if let Some(reason) = router.push(piece, &mut out) {
                router.finish(&mut out);
                return (out, Some(reason));
            }
        }
        router.finish(&mut out);
        (out, None)
    }

    /// The completed calls among `events`: (index, name, arguments).
    fn ends(events: &[GenerationEvent]) -> Vec<(usize, String, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                GenerationEvent::ToolCallEnd {
                    index,
                    name,
                    arguments,
                } => Some((*index, name.clone(), arguments.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn tool_calls_stream_and_complete() {
        let mut router = OutputRouter::new(true, Answer::Text, &[]);
        let text = "<tool_call>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris \\\"}\"}}, {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2.5}}]</tool_call>";
        // Feed in small uneven pieces.
        let chars: Vec<char> = text.chars().collect();
        let pieces: Vec<String> = chars.chunks(3).map(|c| c.iter().collect()).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let (events, reason) = run(&mut router, &refs);
        assert_eq!(reason, Some(StopReason::ToolCalls));
        let ends = ends(&events);
        assert_eq!(
            ends,
            vec![
                (
                    0,
                    "get_weather".to_string(),
                    "{\"city\": \"Paris \\\"}\"}".to_string()
                ),
                (1, "add".to_string(), "{\"a\": 1, \"b\": -2.5}".to_string()),
            ]
        );
        // Deltas concatenate to the arguments, and come after the start.
        let mut deltas = String::new();
        let mut started = false;
        for e in &events {
            match e {
                GenerationEvent::ToolCallStart { index: 0, .. } => started = true,
                GenerationEvent::ToolCallDelta { index: 0, delta } => {
                    assert!(started);
                    deltas.push_str(delta);
                }
                _ => {}
            }
        }
        assert_eq!(deltas, "{\"city\": \"Paris \\\"}\"}");
        assert_eq!(router.completed_calls(), 2);
    }

    #[test]
    fn a_call_object_in_tags_and_bare_calls_are_calls_too() {
        let one = vec![(0, "add".to_string(), "{\"a\": 1}".to_string())];
        for text in [
            // Qwen's own form: one object per block.
            "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>",
            // A bare list, and a bare object: complete at their last bracket.
            "[{\"name\": \"add\", \"arguments\": {\"a\": 1}}]",
            "{\"name\": \"add\", \"arguments\": {\"a\": 1}}",
        ] {
            let mut router = OutputRouter::new(true, Answer::Text, &[]);
            let pieces: Vec<String> = text
                .chars()
                .collect::<Vec<_>>()
                .chunks(2)
                .map(|c| c.iter().collect())
                .collect();
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let (events, reason) = run(&mut router, &refs);
            assert_eq!(reason, Some(StopReason::ToolCalls), "{text}");
            assert_eq!(ends(&events), one, "{text}");
            assert!(
                !events.iter().any(|e| matches!(e, GenerationEvent::Text(_))),
                "{text}: {events:?}"
            );
        }
        // A bare list of two.
        let mut router = OutputRouter::new(true, Answer::Text, &[]);
        let (events, reason) = run(
            &mut router,
            &["[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {}}]"],
        );
        assert_eq!(reason, Some(StopReason::ToolCalls));
        assert_eq!(ends(&events).len(), 2);
        // Beside a JSON answer, `{` is the answer.
        let mut router = OutputRouter::new(true, Answer::Json, &[]);
        let (events, _) = run(&mut router, &["{\"name\": \"x\"}"]);
        assert_eq!(events, [GenerationEvent::Text("{\"name\": \"x\"}".into())]);
    }

    /// Feeds `text` one character at a time.
    fn run_chars(
        router: &mut OutputRouter,
        text: &str,
    ) -> (Vec<GenerationEvent>, Option<StopReason>) {
        let pieces: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        run(router, &refs)
    }

    fn text_of(events: &[GenerationEvent]) -> String {
        events
            .iter()
            .map(|e| match e {
                GenerationEvent::Text(t) => t.as_str(),
                _ => "",
            })
            .collect()
    }

    #[test]
    fn fenced_calls_are_calls_and_other_fences_are_text() {
        let call = r#"{"name": "add", "arguments": {"a": 1}}"#;
        let end = GenerationEvent::ToolCallEnd {
            index: 0,
            name: "add".into(),
            arguments: r#"{"a": 1}"#.into(),
        };
        for text in [
            format!("```json\n{call}\n```"),
            format!("```json{call}```"),
            format!("```json \n[{call}]  ```"),
        ] {
            for answer in [Answer::Text, Answer::Json, Answer::None] {
                // One character at a time, and in one piece.
                for whole in [false, true] {
                    let mut router = OutputRouter::new(true, answer, &[]);
                    let (events, reason) = if whole {
                        run(&mut router, &[text.as_str()])
                    } else {
                        run_chars(&mut router, &text)
                    };
                    assert_eq!(reason, Some(StopReason::ToolCalls), "{text:?} {answer:?}");
                    assert!(events.contains(&end), "{text:?}: {events:?}");
                    assert_eq!(text_of(&events), "", "{text:?}");
                }
            }
        }
        // Text that starts like a fence is released whole once it is known to be text.
        for text in [
            "```python\nprint(1)\n```",
            "`x` is a variable",
            "```json\n\"hi\"\n```",
            "```json\n\n\n{\"x\": 1}",
            "```jsonl\n{}",
        ] {
            let mut router = OutputRouter::new(true, Answer::Text, &[]);
            let (events, reason) = run_chars(&mut router, text);
            assert_eq!(reason, None, "{text:?}");
            assert_eq!(text_of(&events), text);
            assert!(router.is_free_text(), "{text:?}");
        }
        // Generation that ends while the start is ambiguous was text.
        for text in ["`", "```js", "```json\n"] {
            let mut router = OutputRouter::new(true, Answer::Text, &[]);
            let (events, _) = run_chars(&mut router, text);
            assert_eq!(text_of(&events), text);
        }
        // Without tools a fence is just text, from the first character.
        let mut router = OutputRouter::new(false, Answer::Text, &[]);
        let mut out = Vec::new();
        assert_eq!(router.push("`", &mut out), None);
        assert!(router.is_free_text());
        assert_eq!(text_of(&out), "`");
    }

    #[test]
    fn scalar_arguments_and_whitespace() {
        let mut router = OutputRouter::new(true, Answer::None, &[]);
        let (events, reason) = run(
            &mut router,
            &["<tool_call>\n[\n{ \"name\" : \"t\" , \"arguments\" : 42 }\n]\n</tool_call>"],
        );
        assert_eq!(reason, Some(StopReason::ToolCalls));
        assert!(events.contains(&GenerationEvent::ToolCallEnd {
            index: 0,
            name: "t".into(),
            arguments: "42".into()
        }));
    }

    #[test]
    fn text_answer_with_stop_sequence() {
        let mut router = OutputRouter::new(true, Answer::Text, &["STOP".to_string()]);
        let (events, reason) = run(&mut router, &["Hello", " world ST", "OP more"]);
        assert_eq!(reason, Some(StopReason::StopSequence));
        let text: String = events
            .iter()
            .map(|e| match e {
                GenerationEvent::Text(t) => t.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(text, "Hello world ");
        assert!(router.is_free_text());
    }

    #[test]
    fn json_answer_ends_when_complete() {
        let mut router = OutputRouter::new(false, Answer::Json, &["}".to_string()]);
        let (events, reason) = run(&mut router, &["{\"a\": \"}\"", ", \"b\": [1]", "}", "\n"]);
        assert_eq!(reason, Some(StopReason::EndOfTurn));
        assert_eq!(events.len(), 3);
    }
}
