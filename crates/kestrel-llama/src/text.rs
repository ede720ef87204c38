//! Turning token bytes into text: UTF-8 sequences split across tokens, and stop sequences.

/// Decodes a stream of byte chunks into `String` pieces, holding back an incomplete UTF-8
/// sequence at the end of a chunk until the next chunk completes it. Invalid bytes become
/// U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Appends `bytes` and returns the text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    return out;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    // `valid_up_to` bytes are valid UTF-8 by contract.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match error.error_len() {
                        // An incomplete sequence at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Returns whatever is left (an incomplete sequence becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

/// Finds stop sequences in streamed text. Text that might be the start of a stop sequence is
/// held back until it is known not to be one, so a stop sequence never leaks into the output.
#[derive(Debug, Default)]
pub(crate) struct StopMatcher {
    stops: Vec<String>,
    /// Text received but not yet released.
    held: String,
}

/// What [`StopMatcher::push`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StopScan {
    /// No stop sequence yet; release this text (may be empty).
    Continue(String),
    /// A stop sequence was found; release this text (everything before it) and stop.
    Stopped(String),
}

impl StopMatcher {
    pub fn new(stops: &[String]) -> Self {
        Self {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    /// Adds `text` and reports what can be released.
    pub fn push(&mut self, text: &str) -> StopScan {
        if self.stops.is_empty() {
            return StopScan::Continue(text.to_string());
        }
        self.held.push_str(text);
        // The earliest stop sequence wins.
        let found = self
            .stops
            .iter()
            .filter_map(|stop| self.held.find(stop.as_str()))
            .min();
        if let Some(at) = found {
            let out = self.held[..at].to_string();
            self.held.clear();
            return StopScan::Stopped(out);
        }
        // Hold back the longest suffix that is a proper prefix of some stop sequence.
        let mut keep = 0;
        for stop in &self.stops {
            for (i, _) in stop.char_indices().skip(1) {
                let prefix = &stop[..i];
                if i > keep && self.held.ends_with(prefix) {
                    keep = i;
                }
            }
        }
        let release = self.held.len() - keep;
        let out = self.held[..release].to_string();
        self.held.drain(..release);
        StopScan::Continue(out)
    }

    /// Releases held text at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_chunks() {
        let bytes = "héllo 🦀!".as_bytes();
        let mut decoder = Utf8Decoder::default();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&decoder.push(std::slice::from_ref(b)));
        }
        out.push_str(&decoder.finish());
        assert_eq!(out, "héllo 🦀!");
    }

    #[test]
    fn utf8_invalid_bytes_are_replaced() {
        let mut decoder = Utf8Decoder::default();
        assert_eq!(decoder.push(b"a\xffb"), "a\u{FFFD}b");
        assert_eq!(decoder.push(b"\xe2\x82"), "");
        assert_eq!(decoder.finish(), "\u{FFFD}");
    }

    #[test]
    fn stop_sequences_are_held_back_and_cut() {
        let mut m = StopMatcher::new(&["END".to_string(), "\n\n".to_string()]);
        assert_eq!(m.push("hello E"), StopScan::Continue("hello ".into()));
        assert_eq!(m.push("N"), StopScan::Continue(String::new()));
        assert_eq!(m.push("Dx"), StopScan::Stopped(String::new()));
        let mut m = StopMatcher::new(&["END".to_string()]);
        assert_eq!(m.push("a EN"), StopScan::Continue("a ".into()));
        assert_eq!(m.push("d"), StopScan::Continue("ENd".into()));
        assert_eq!(m.finish(), "");
        let mut m = StopMatcher::new(&["\n\n".to_string()]);
        assert_eq!(m.push("x\n"), StopScan::Continue("x".into()));
        assert_eq!(m.push("\ny"), StopScan::Stopped(String::new()));
        let mut m = StopMatcher::new(&[]);
        assert_eq!(m.push("ab"), StopScan::Continue("ab".into()));
    }
}
