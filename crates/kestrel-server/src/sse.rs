//! Agent streams as server-sent events: `data: <event JSON>` per event, then `data: [DONE]`.

use std::convert::Infallible;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use kestrel_core::agent::AgentStream;

/// The SSE response of a run. Dropping it (a client that goes away) leaves the run to finish
/// in the background.
pub(crate) fn run_events(
    stream: AgentStream,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let events = stream.map(|event| Ok(SseEvent::default().data(event.to_json())));
    let done = futures::stream::once(async { Ok(SseEvent::default().data("[DONE]")) });
    Sse::new(events.chain(done)).keep_alive(KeepAlive::default())
}
