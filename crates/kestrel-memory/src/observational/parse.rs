//! The strict parsing of an observer's or reflector's answer: only list lines become
//! observations.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

/// One parsed observation.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ObservationLine {
    pub(super) at: Option<DateTime<Utc>>,
    pub(super) text: String,
}

/// What an observer or reflector answered.
#[derive(Debug, PartialEq)]
pub(super) enum Parsed {
    /// `NONE`: nothing worth keeping.
    Nothing,
    /// The observation lines (possibly none, if the answer ignored the format).
    Lines(Vec<ObservationLine>),
}

/// Keeps only observation lines: unindented list items (`- `, `* `, `• `, `1. `, `1) `), each
/// with the indented lines that directly follow it. Anything else (prose, headings, tags, code
/// fences, blank lines, echoed transcript lines) is dropped and ends the current item.
pub(super) fn parse_observations(answer: &str) -> Parsed {
    let trimmed = answer.trim();
    if trimmed.trim_matches('.').eq_ignore_ascii_case("none") {
        return Parsed::Nothing;
    }
    let mut lines: Vec<ObservationLine> = Vec::new();
    let mut open = false;
    for raw in answer.lines() {
        let indented = raw.starts_with([' ', '\t']);
        let line = raw.trim();
        if line.is_empty() {
            open = false;
            continue;
        }
        if indented {
            if open && let Some(last) = lines.last_mut() {
                let continuation = strip_item_marker(line).unwrap_or(line);
                last.text.push_str("; ");
                last.text.push_str(continuation);
            }
            continue;
        }
        match strip_item_marker(line) {
            Some(item) if !item.is_empty() => {
                let (at, text) = split_date(item);
                if text.is_empty() {
                    open = false;
                    continue;
                }
                lines.push(ObservationLine {
                    at,
                    text: text.to_owned(),
                });
                open = true;
            }
            _ => open = false,
        }
    }
    Parsed::Lines(lines)
}

/// The item text of a list line, without its marker.
pub(super) fn strip_item_marker(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "• "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest.trim());
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(rest.trim());
        }
    }
    None
}

/// A leading `YYYY-MM-DD HH:MM` (or `YYYY-MM-DD`), optionally in brackets or parentheses and
/// followed by `UTC` and a separator, parsed as UTC; and the rest.
fn split_date(item: &str) -> (Option<DateTime<Utc>>, &str) {
    let open = item.starts_with(['[', '(']);
    let body = if open { &item[1..] } else { item };
    let (at, rest) = if let Some(at) = body
        .get(..16)
        .and_then(|s| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").ok())
    {
        (at.and_utc(), &body[16..])
    } else if let Some(day) = body
        .get(..10)
        .and_then(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
    {
        (day.and_time(chrono::NaiveTime::MIN).and_utc(), &body[10..])
    } else {
        return (None, item);
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("UTC").unwrap_or(rest).trim_start();
    let rest = if open {
        rest.strip_prefix([']', ')']).unwrap_or(rest)
    } else {
        rest
    };
    let rest = rest
        .trim_start_matches([' ', ':', '|', '-', '—', '–'])
        .trim();
    (Some(at), rest)
}
