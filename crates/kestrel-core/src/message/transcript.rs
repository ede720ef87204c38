//! A run's conversation, shared with its model requests and its tools instead of copied.

use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Message, Part, Role};

/// A list of messages that is cheap to clone: a run's conversation, and the messages of a
/// model request ([`ModelRequest::messages`](crate::model::ModelRequest::messages)).
///
/// It reads as a slice of [`Message`]s (`iter`, `len`, `last`, indexing, `for m in &list`).
/// The messages live in one reference-counted vector, so a run hands its conversation to a
/// model request, or to a tool that reads it
/// ([`ToolContext::conversation`](crate::tool::ToolContext::conversation)), without copying
/// a message: the vector's front holds the request's system messages, which the run's view
/// skips. Changing a list (`push`, `extend`) copies the vector only while another list still
/// shares it, so what a request was sent never changes under it.
///
/// It serialises as a plain list of messages (a run's snapshot stores its conversation
/// without the system messages, which are rebuilt for each request). Build one from a
/// `Vec<Message>` with `.into()`; [`Transcript::into_vec`] gives a `Vec` of your own.
#[derive(Clone, Default)]
pub struct Transcript {
    all: Arc<Vec<Message>>,
    /// How many messages at the front of `all` this list skips: a run's conversation skips
    /// the system messages of its latest request.
    system: usize,
}

impl Transcript {
    /// A conversation of `messages`.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            all: Arc::new(messages),
            system: 0,
        }
    }

    /// The messages as a `Vec` of your own: taken without a copy when no other list shares
    /// them, copied otherwise.
    pub fn into_vec(self) -> Vec<Message> {
        let system = self.system;
        let mut all = Arc::try_unwrap(self.all).unwrap_or_else(|shared| (*shared).clone());
        all.drain(..system.min(all.len()));
        all
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        Arc::make_mut(&mut self.all).push(message);
    }

    /// Appends messages.
    pub fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        let mut messages = messages.into_iter().peekable();
        if messages.peek().is_some() {
            Arc::make_mut(&mut self.all).extend(messages);
        }
    }

    /// Puts `messages` before the conversation (recalled history).
    pub fn prepend(&mut self, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let at = self.system;
        Arc::make_mut(&mut self.all).splice(at..at, messages);
    }

    /// Removes and returns the messages from `at` on (`at` counts from the conversation's
    /// first message; past the end, nothing is removed).
    pub fn split_off(&mut self, at: usize) -> Vec<Message> {
        let at = (self.system + at).min(self.all.len());
        if at == self.all.len() {
            return Vec::new();
        }
        match Arc::get_mut(&mut self.all) {
            Some(all) => all.split_off(at),
            None => {
                // Shared: copy the head rather than the whole vector twice.
                let tail = self.all[at..].to_vec();
                self.all = Arc::new(self.all[..at].to_vec());
                tail
            }
        }
    }

    /// The messages of a model request: system messages of these texts, then this
    /// conversation, sharing its vector. The system messages stay at the vector's front for
    /// the next request, which usually has the same ones.
    pub(crate) fn with_system(&mut self, system: &[&str]) -> Transcript {
        let same = system.len() == self.system
            && system
                .iter()
                .zip(self.all.iter())
                .all(|(text, old)| old.role == Role::System && is_text(old, text));
        if !same {
            let old = self.system;
            self.system = system.len();
            let fresh = system.iter().map(|text| Message::system(*text));
            Arc::make_mut(&mut self.all).splice(0..old, fresh);
        }
        Transcript {
            all: Arc::clone(&self.all),
            system: 0,
        }
    }
}

impl Deref for Transcript {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        self.all.get(self.system..).unwrap_or_default()
    }
}

impl From<Vec<Message>> for Transcript {
    fn from(messages: Vec<Message>) -> Self {
        Self::new(messages)
    }
}

impl FromIterator<Message> for Transcript {
    fn from_iter<I: IntoIterator<Item = Message>>(messages: I) -> Self {
        Self::new(messages.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Transcript {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for Transcript {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Transcript {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Transcript {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Self::new)
    }
}

fn is_text(message: &Message, text: &str) -> bool {
    matches!(message.parts.as_slice(), [Part::Text { text: t }] if t == text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn texts(messages: &[Message]) -> Vec<String> {
        messages.iter().map(Message::text).collect()
    }

    #[test]
    fn a_request_shares_the_conversation_until_it_changes() {
        let mut t = Transcript::new(vec![Message::user("a")]);
        let request = t.with_system(&["sys"]);
        assert_eq!(texts(&request), ["sys", "a"]);
        assert_eq!(texts(&t), ["a"]);
        // While the request is held, appending copies; the request keeps what it was sent.
        t.push(Message::user("b"));
        assert_eq!(texts(&request), ["sys", "a"]);
        drop(request);
        let again = t.with_system(&["sys"]);
        assert_eq!(texts(&again), ["sys", "a", "b"]);
        let before = Arc::as_ptr(&again.all);
        drop(again);
        // No holder: appending and sending again use the same vector.
        t.push(Message::user("c"));
        let third = t.with_system(&["sys"]);
        assert_eq!(Arc::as_ptr(&third.all), before);
        assert_eq!(texts(&third), ["sys", "a", "b", "c"]);
    }

    #[test]
    fn changed_system_messages_replace_the_old_ones() {
        let mut t = Transcript::new(vec![Message::user("a")]);
        let _ = t.with_system(&["one", "two"]);
        let request = t.with_system(&["three"]);
        assert_eq!(texts(&request), ["three", "a"]);
        let request = t.with_system(&[]);
        assert_eq!(texts(&request), ["a"]);
        assert_eq!(request[0].role, Role::User);
    }

    #[test]
    fn history_goes_after_the_system_messages_and_split_off_counts_from_the_conversation() {
        let mut t = Transcript::new(vec![Message::user("input")]);
        let held = t.with_system(&["sys"]);
        t.prepend(vec![Message::user("old"), Message::assistant("reply")]);
        assert_eq!(texts(&t), ["old", "reply", "input"]);
        t.push(Message::assistant("answer"));
        let shared = t.clone();
        let tail = t.split_off(3);
        assert_eq!(texts(&tail), ["answer"]);
        assert_eq!(texts(&t), ["old", "reply", "input"]);
        assert_eq!(texts(&shared), ["old", "reply", "input", "answer"]);
        assert!(t.split_off(9).is_empty());
        assert_eq!(texts(&held), ["sys", "input"]);
    }

    #[test]
    fn into_vec_gives_the_list_without_the_system_messages() {
        let mut t = Transcript::new(vec![Message::user("a"), Message::user("b")]);
        let request = t.with_system(&["sys"]);
        assert_eq!(texts(&request.clone().into_vec()), ["sys", "a", "b"]);
        // Shared with the request: copied, and the request keeps its messages.
        assert_eq!(texts(&t.clone().into_vec()), ["a", "b"]);
        drop(request);
        assert_eq!(texts(&t.into_vec()), ["a", "b"]);
    }

    #[test]
    fn it_serialises_as_the_conversation_alone() {
        let mut t = Transcript::new(vec![Message::user("a")]);
        let _ = t.with_system(&["sys"]);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(1));
        let back: Transcript = serde_json::from_value(json).unwrap();
        assert_eq!(back, t);
    }
}
