//! Identifier generation.

/// A fresh random identifier (UUID v4, hyphenated), used for run, message and tool call ids.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
