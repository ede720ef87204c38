//! Thread titles, generated from the first user message after a run.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kestrel_core::memory::MemoryScope;
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ModelRequest, ModelSettings, ModelSpec, SharedModel, generate};
use kestrel_storage::{Anchor, Selection, SeqRange, Storage, ThreadPatch};

/// The instructions the title model gets unless [`GenerateTitle::instructions`] replaces them.
pub const DEFAULT_TITLE_INSTRUCTIONS: &str = "You write the title of a conversation from the \
     first message the user sent. Answer with the title only: at most 80 characters, in the \
     language of the message, summarising what the user wants, without quotes or a trailing \
     period.";

/// The longest title kept, in characters.
const MAX_TITLE_CHARS: usize = 80;

/// The most tokens a title answer may take.
const MAX_TITLE_TOKENS: u32 = 32;

/// How much of the first message the title model reads, in characters.
const MAX_INPUT_CHARS: usize = 4000;

/// Title generation options (`generate_title` in Mastra): a model and its instructions.
///
/// After a run on a thread without a title, memory asks the model for one, from the thread's
/// first user message, and stores it. This happens in the background: the response is never
/// delayed, and a failure is logged, not reported to the run.
#[derive(Debug, Clone)]
pub struct GenerateTitle {
    pub(crate) model: ModelSpec,
    pub(crate) instructions: String,
    pub(crate) timeout: Duration,
}

impl GenerateTitle {
    /// Titles by `model`: a `provider/model` string (resolved when the memory is built) or a
    /// model object.
    pub fn new(model: impl Into<ModelSpec>) -> Self {
        Self {
            model: model.into(),
            instructions: DEFAULT_TITLE_INSTRUCTIONS.to_owned(),
            timeout: Duration::from_secs(60),
        }
    }

    /// Replaces the instructions (the system message of the title request).
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// Gives up on a title after this long (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Generates titles; at most one at a time per thread in this process.
pub(crate) struct TitleGenerator {
    model: SharedModel,
    instructions: String,
    timeout: Duration,
    in_flight: Mutex<HashSet<String>>,
}

/// Marks a thread's title as being generated until dropped.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<String>>,
    thread_id: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.thread_id);
    }
}

impl TitleGenerator {
    pub(crate) fn new(model: SharedModel, options: &GenerateTitle) -> Self {
        Self {
            model,
            instructions: options.instructions.clone(),
            timeout: options.timeout,
            in_flight: Mutex::new(HashSet::new()),
        }
    }

    /// Titles the thread if it has no title; logs what goes wrong.
    pub(crate) async fn run(&self, storage: &Arc<dyn Storage>, scope: &MemoryScope) {
        let thread_id = scope.thread_id.clone();
        let fresh = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(thread_id.clone());
        if !fresh {
            return;
        }
        let _in_flight = InFlight {
            set: &self.in_flight,
            thread_id,
        };
        match self.title(storage, scope).await {
            Ok(Some(title)) => {
                tracing::debug!(thread_id = %scope.thread_id, %title, "thread titled");
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(
                thread_id = %scope.thread_id,
                model = ?self.model,
                %error,
                "generating the thread's title failed; it stays untitled"
            ),
        }
    }

    async fn title(
        &self,
        storage: &Arc<dyn Storage>,
        scope: &MemoryScope,
    ) -> Result<Option<String>, String> {
        let (thread_id, resource_id) = (&scope.thread_id, &scope.resource_id);
        let Some(thread) = storage
            .get_thread(thread_id)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        if thread.resource_id != *resource_id || thread.title.is_some() {
            return Ok(None);
        }
        let first = SeqRange {
            limit: Some(20),
            anchor: Anchor::Start,
            ..SeqRange::default()
        };
        let listed = storage
            .list_messages(thread_id, Some(resource_id), Selection::Range(first))
            .await
            .map_err(|e| e.to_string())?;
        let Some(first_message) = listed
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.to_message().text())
            .find(|text| !text.trim().is_empty())
        else {
            return Ok(None);
        };
        let input: String = first_message.chars().take(MAX_INPUT_CHARS).collect();
        let request = ModelRequest {
            messages: vec![Message::system(&self.instructions), Message::user(input)].into(),
            // A title is one short line; a model that rambles must not hold the model (a local
            // one serves requests in turn) for a whole context window.
            settings: ModelSettings {
                max_output_tokens: Some(MAX_TITLE_TOKENS),
                ..ModelSettings::default()
            },
            ..ModelRequest::default()
        };
        let response = tokio::time::timeout(self.timeout, generate(self.model.as_ref(), request))
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
            .map_err(|e| e.to_string())?;
        let Some(title) = clean_title(&response.text) else {
            return Err("the model answered with an empty title".into());
        };
        // Another instance may have titled it meanwhile; the check is cheap.
        let current = storage
            .get_thread(thread_id)
            .await
            .map_err(|e| e.to_string())?;
        if current.is_none_or(|t| t.title.is_some()) {
            return Ok(None);
        }
        let patch = ThreadPatch {
            title: Some(title.clone()),
            metadata: None,
        };
        storage
            .update_thread(thread_id, patch)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(title))
    }
}

/// The first non-empty line of the model's answer without Markdown heading marks, a `Title:`
/// prefix, quotes or a trailing period, cut to [`MAX_TITLE_CHARS`].
pub(crate) fn clean_title(raw: &str) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_start_matches('#').trim();
    let line = match line.get(..6) {
        Some(prefix) if prefix.eq_ignore_ascii_case("title:") => line.get(6..).unwrap_or(""),
        _ => line,
    };
    let quotes = |c: char| matches!(c, '"' | '\'' | '`' | '*' | '“' | '”' | '«' | '»');
    let line = line.trim().trim_matches(quotes).trim();
    let line = line.strip_suffix('.').unwrap_or(line).trim();
    let title: String = line.chars().take(MAX_TITLE_CHARS).collect();
    let title = title.trim_end().to_owned();
    (!title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::clean_title;

    #[test]
    fn titles_are_cleaned() {
        assert_eq!(
            clean_title("\n\"Weather in Lisbon.\"\n"),
            Some("Weather in Lisbon".into())
        );
        assert_eq!(
            clean_title("## Title: Trip plans"),
            Some("Trip plans".into())
        );
        assert_eq!(clean_title("  \n "), None);
        assert_eq!(clean_title(&"x".repeat(200)).map(|t| t.len()), Some(80));
    }
}
