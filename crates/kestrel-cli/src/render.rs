//! Turning a run's events into terminal output.
//!
//! In text mode the answer streams to stdout (flushed per delta), reasoning is shown dimmed
//! when stdout is a terminal, and each tool call becomes one line on stderr:
//! `⚙ add({"a":1}) → {"sum":3}`, or `⚙ add({"a":1}) ✗ <error>` when it failed. In JSON mode
//! every event is one line of its wire form on stdout and nothing else is written there. In both
//! modes an `error` event prints `error: <text>` on stderr.

use std::io::{self, Write};

use kestrel::event::{Event, EventKind};
use serde_json::Value;

use crate::terminal::{BOLD_RED, DIM, RED, RESET, Terminal};

/// Longest rendering of a tool's arguments or result, in characters.
const MAX_VALUE_CHARS: usize = 120;
/// Longest rendering of a tool error, in characters.
const MAX_ERROR_CHARS: usize = 200;

/// How events are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// One JSON line per event instead of text.
    pub json: bool,
    /// Show reasoning (text mode only).
    pub show_reasoning: bool,
    /// Write ANSI codes to stdout.
    pub out_color: bool,
    /// Write ANSI codes to stderr.
    pub err_color: bool,
}

impl RenderOptions {
    /// The options for these streams: reasoning only on a terminal, colour unless `NO_COLOR`.
    pub fn for_terminal(json: bool, terminal: &Terminal) -> Self {
        Self {
            json,
            show_reasoning: terminal.stdout,
            out_color: terminal.stdout_color(),
            err_color: terminal.stderr_color(),
        }
    }
}

/// Writes events to an output (stdout) and a diagnostics stream (stderr).
#[derive(Debug)]
pub struct Renderer<O: Write, E: Write> {
    out: O,
    err: E,
    options: RenderOptions,
    /// The last thing written to `out` was not a line end.
    mid_line: bool,
    /// A reasoning part is open (and shown).
    in_reasoning: bool,
    /// An `error` event was shown since the last [`Renderer::begin_run`].
    saw_error: bool,
}

impl<O: Write, E: Write> Renderer<O, E> {
    /// A renderer writing to `out` and `err`.
    pub fn new(out: O, err: E, options: RenderOptions) -> Self {
        Self {
            out,
            err,
            options,
            mid_line: false,
            in_reasoning: false,
            saw_error: false,
        }
    }

    /// Resets the per-run state before a new run.
    pub fn begin_run(&mut self) {
        self.in_reasoning = false;
        self.saw_error = false;
    }

    /// Whether an `error` event was shown since the last [`Renderer::begin_run`].
    pub fn saw_error(&self) -> bool {
        self.saw_error
    }

    /// Shows one event. Errors are failures to write (a closed pipe…).
    pub fn event(&mut self, event: &Event) -> io::Result<()> {
        if let EventKind::Error(error) = &event.kind {
            self.saw_error = true;
            if self.options.json {
                self.json_line(event)?;
            } else {
                self.end_line()?;
            }
            return self.error_line(&error.error);
        }
        if self.options.json {
            return self.json_line(event);
        }
        match &event.kind {
            EventKind::TextDelta(delta) => {
                self.close_reasoning()?;
                self.write_out(&delta.text)?;
            }
            EventKind::ReasoningStart(_) if self.options.show_reasoning => {
                self.end_line()?;
                self.in_reasoning = true;
                let start = if self.options.out_color {
                    DIM
                } else {
                    "[thinking] "
                };
                self.out.write_all(start.as_bytes())?;
                self.out.flush()?;
                self.mid_line = !self.options.out_color;
            }
            EventKind::ReasoningDelta(delta) if self.in_reasoning => {
                self.write_out(&delta.text)?;
            }
            EventKind::ReasoningEnd(_) => self.close_reasoning()?,
            EventKind::ToolResult(result) => {
                let line = format!(
                    "⚙ {}({}) → {}",
                    result.tool_name,
                    compact(&result.args, MAX_VALUE_CHARS),
                    compact(&result.result, MAX_VALUE_CHARS)
                );
                self.tool_line(&line, false)?;
            }
            EventKind::ToolError(error) => {
                let line = format!(
                    "⚙ {}({}) ✗ {}",
                    error.tool_name,
                    compact(&error.args, MAX_VALUE_CHARS),
                    truncate(error.error.lines().next().unwrap_or(""), MAX_ERROR_CHARS)
                );
                self.tool_line(&line, true)?;
            }
            EventKind::Finish(_) => {
                self.close_reasoning()?;
                self.end_line()?;
            }
            EventKind::Abort(_) => {
                self.close_reasoning()?;
                self.end_line()?;
                self.notice("(stopped)")?;
            }
            EventKind::Tripwire(tripwire) => {
                self.close_reasoning()?;
                self.end_line()?;
                let by = tripwire.processor_id.as_deref().unwrap_or("a processor");
                self.notice(&format!("(blocked by {by}: {})", tripwire.reason))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Prints `error: <message>` as one line on stderr.
    pub fn error_line(&mut self, message: &str) -> io::Result<()> {
        let message = message.replace('\n', " ");
        if self.options.err_color {
            writeln!(self.err, "{BOLD_RED}error:{RESET} {message}")?;
        } else {
            writeln!(self.err, "error: {message}")?;
        }
        self.err.flush()
    }

    /// Prints a short note on stderr (dimmed when colour is on).
    pub fn notice(&mut self, message: &str) -> io::Result<()> {
        if self.options.err_color {
            writeln!(self.err, "{DIM}{message}{RESET}")?;
        } else {
            writeln!(self.err, "{message}")?;
        }
        self.err.flush()
    }

    /// Writes the REPL prompt (or a line end after it): to stdout, or to stderr in JSON mode
    /// so that stdout holds events only.
    pub fn prompt(&mut self, text: &str) -> io::Result<()> {
        if self.options.json {
            self.err.write_all(text.as_bytes())?;
            self.err.flush()
        } else {
            self.out.write_all(text.as_bytes())?;
            self.out.flush()
        }
    }

    /// Ends the current output line, if one is open.
    pub fn end_line(&mut self) -> io::Result<()> {
        if self.mid_line {
            self.mid_line = false;
            self.out.write_all(b"\n")?;
            self.out.flush()?;
        }
        Ok(())
    }

    fn json_line(&mut self, event: &Event) -> io::Result<()> {
        let line = serde_json::to_string(event).map_err(io::Error::other)?;
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    fn write_out(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        self.mid_line = !text.ends_with('\n');
        Ok(())
    }

    fn close_reasoning(&mut self) -> io::Result<()> {
        if !self.in_reasoning {
            return Ok(());
        }
        self.in_reasoning = false;
        if self.options.out_color {
            self.out.write_all(RESET.as_bytes())?;
        }
        // A line end, then a blank line between the reasoning and the answer.
        self.end_line()?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    fn tool_line(&mut self, line: &str, failed: bool) -> io::Result<()> {
        // The tool line goes to stderr; keep it off a half-written answer line on a terminal.
        self.close_reasoning()?;
        self.end_line()?;
        match (self.options.err_color, failed) {
            (true, false) => writeln!(self.err, "{DIM}{line}{RESET}")?,
            (true, true) => writeln!(self.err, "{RED}{line}{RESET}")?,
            (false, _) => writeln!(self.err, "{line}")?,
        }
        self.err.flush()
    }
}

/// `value` as compact JSON, cut to `max` characters.
fn compact(value: &Value, max: usize) -> String {
    truncate(&value.to_string(), max)
}

/// `text` cut to `max` characters, with `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use kestrel::event::{
        AbortPayload, ErrorPayload, FinishOutput, FinishPayload, PartIdPayload, StepResultInfo,
        TextDeltaPayload, ToolErrorPayload, ToolResultPayload,
    };
    use kestrel::model::{FinishReason, Usage};
    use serde_json::json;

    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event::agent(Arc::from("run-1"), kind)
    }

    fn text(t: &str) -> Event {
        ev(EventKind::TextDelta(TextDeltaPayload {
            id: "t".into(),
            text: t.into(),
        }))
    }

    fn reasoning(t: &str) -> Vec<Event> {
        vec![
            ev(EventKind::ReasoningStart(PartIdPayload { id: "r".into() })),
            ev(EventKind::ReasoningDelta(TextDeltaPayload {
                id: "r".into(),
                text: t.into(),
            })),
            ev(EventKind::ReasoningEnd(PartIdPayload { id: "r".into() })),
        ]
    }

    fn finish() -> Event {
        ev(EventKind::Finish(FinishPayload {
            step_result: StepResultInfo {
                reason: FinishReason::Stop,
                is_continued: false,
            },
            output: FinishOutput {
                text: String::new(),
                usage: Usage::default(),
                object: None,
            },
            metadata: None,
        }))
    }

    fn options(json: bool, tty: bool) -> RenderOptions {
        RenderOptions {
            json,
            show_reasoning: tty,
            out_color: tty,
            err_color: tty,
        }
    }

    fn render(options: RenderOptions, events: &[Event]) -> (String, String, bool) {
        let mut r = Renderer::new(Vec::new(), Vec::new(), options);
        for e in events {
            r.event(e).unwrap();
        }
        let saw_error = r.saw_error();
        (
            String::from_utf8(r.out).unwrap(),
            String::from_utf8(r.err).unwrap(),
            saw_error,
        )
    }

    #[test]
    fn text_streams_and_ends_with_a_newline() {
        let (out, err, _) = render(options(false, false), &[text("Hel"), text("lo"), finish()]);
        assert_eq!(out, "Hello\n");
        assert_eq!(err, "");
    }

    #[test]
    fn reasoning_is_hidden_when_not_a_terminal() {
        let mut events = reasoning("hmm");
        events.extend([text("Hi"), finish()]);
        let (out, _, _) = render(options(false, false), &events);
        assert_eq!(out, "Hi\n");
    }

    #[test]
    fn reasoning_is_dimmed_on_a_terminal() {
        let mut events = reasoning("hmm");
        events.extend([text("Hi"), finish()]);
        let (out, _, _) = render(options(false, true), &events);
        assert_eq!(out, format!("{DIM}hmm{RESET}\n\nHi\n"));
    }

    #[test]
    fn reasoning_is_labelled_without_colour() {
        let mut events = reasoning("hmm");
        events.extend([text("Hi"), finish()]);
        let opts = RenderOptions {
            out_color: false,
            err_color: false,
            ..options(false, true)
        };
        let (out, _, _) = render(opts, &events);
        assert_eq!(out, "[thinking] hmm\n\nHi\n");
    }

    #[test]
    fn tool_calls_are_one_line_on_stderr() {
        let events = [
            text("Let me add."),
            ev(EventKind::ToolResult(ToolResultPayload {
                tool_call_id: "c1".into(),
                tool_name: "add".into(),
                args: json!({"a": 1}),
                result: json!({"sum": 3}),
                is_error: false,
            })),
            ev(EventKind::ToolError(ToolErrorPayload {
                tool_call_id: "c2".into(),
                tool_name: "div".into(),
                args: json!({"a": 1, "b": 0}),
                error: "division by zero\nat line 3".into(),
            })),
            text("Done."),
            finish(),
        ];
        let (out, err, _) = render(options(false, false), &events);
        assert_eq!(out, "Let me add.\nDone.\n");
        assert_eq!(
            err,
            "⚙ add({\"a\":1}) → {\"sum\":3}\n⚙ div({\"a\":1,\"b\":0}) ✗ division by zero\n"
        );
    }

    #[test]
    fn long_values_are_truncated() {
        assert_eq!(truncate("abcdef", 3), "abc…");
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("ééé", 2), "éé…");
    }

    #[test]
    fn errors_go_to_stderr_as_one_line() {
        let events = [
            text("partial"),
            ev(EventKind::Error(ErrorPayload {
                error: "boom\nbang".into(),
                kind: "model".into(),
            })),
        ];
        let (out, err, saw_error) = render(options(false, false), &events);
        assert_eq!(out, "partial\n");
        assert_eq!(err, "error: boom bang\n");
        assert!(saw_error);
    }

    #[test]
    fn abort_is_noted() {
        let events = [text("par"), ev(EventKind::Abort(AbortPayload::default()))];
        let (out, err, saw_error) = render(options(false, false), &events);
        assert_eq!(out, "par\n");
        assert_eq!(err, "(stopped)\n");
        assert!(!saw_error);
    }

    #[test]
    fn json_mode_writes_only_wire_lines_to_stdout() {
        let events = [
            text("Hi"),
            finish(),
            ev(EventKind::Error(ErrorPayload {
                error: "boom".into(),
                kind: "model".into(),
            })),
        ];
        let (out, err, _) = render(options(true, true), &events);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        for (line, event) in lines.iter().zip(&events) {
            let parsed: Event = serde_json::from_str(line).unwrap();
            assert_eq!(&parsed, event);
        }
        assert!(err.contains("boom"));
    }
}
