//! The channel a streamed workflow run's events travel on, from its steps to its reader: a
//! leaf, so steps can hold its sending end without naming the stream.

use crate::event::Event;

/// How many events a streamed run may have ahead of its reader before its steps wait.
pub(crate) const STREAM_BACKLOG: usize = 256;

/// Where a streamed run's events go. Each event is boxed: tokio's channel keeps its slots
/// 32 at a time, and 32 events (several hundred bytes each) make a block of about 10 kB, an
/// allocation on malloc's slow path for every streamed run; 32 boxes make 256 bytes.
pub(crate) type EventSender = tokio::sync::mpsc::Sender<Box<Event>>;

/// The reading end of an [`EventSender`].
pub(crate) type EventReceiver = tokio::sync::mpsc::Receiver<Box<Event>>;

/// A streamed run's channel, [`STREAM_BACKLOG`] events deep.
pub(crate) fn event_channel() -> (EventSender, EventReceiver) {
    tokio::sync::mpsc::channel(STREAM_BACKLOG)
}
