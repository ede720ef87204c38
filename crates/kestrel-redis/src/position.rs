//! Positions in a stream: where it ends now, where a run's events begin, and the id just
//! before another (for exclusive ranges).

use redis::aio::MultiplexedConnection;

use crate::pubsub::entry_event;

/// The id of the oldest entry of run `run_id` in the stream, scanning back from its end
/// through at most `limit` entries and stopping at the run's `start` event.
pub(crate) async fn first_entry_of_run(
    connection: &mut MultiplexedConnection,
    key: &str,
    run_id: &str,
    limit: usize,
) -> redis::RedisResult<Option<String>> {
    const PAGE: usize = 256;
    let mut end = "+".to_owned();
    let mut found: Option<String> = None;
    let mut scanned = 0;
    while scanned < limit {
        let page: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(key)
            .arg(&end)
            .arg("-")
            .arg("COUNT")
            .arg(PAGE)
            .query_async(connection)
            .await?;
        let count = page.ids.len();
        for entry in &page.ids {
            scanned += 1;
            let Ok(event) = entry_event(entry) else {
                continue;
            };
            // Other runs' events (a sub-agent's) may be interleaved with the run's.
            if &*event.run_id != run_id {
                continue;
            }
            found = Some(entry.id.clone());
            if matches!(event.kind, kestrel_core::event::EventKind::Start(_)) {
                return Ok(found);
            }
        }
        match page.ids.last() {
            Some(oldest) if count == PAGE => end = before(&oldest.id),
            _ => return Ok(found),
        }
    }
    Ok(found)
}

/// The greatest stream id below `id` (`ms-seq`), for exclusive ranges.
pub(crate) fn before(id: &str) -> String {
    let parsed = id
        .split_once('-')
        .and_then(|(ms, seq)| Some((ms.parse::<u64>().ok()?, seq.parse::<u64>().ok()?)));
    match parsed {
        Some((ms, seq)) if seq > 0 => format!("{ms}-{}", seq - 1),
        Some((ms, _)) if ms > 0 => format!("{}-{}", ms - 1, u64::MAX),
        _ => "0-0".to_owned(),
    }
}

/// The id of the stream's last entry (`0-0` for an empty or missing stream).
pub(crate) async fn last_entry_id(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<String> {
    let newest: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(key)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(connection)
        .await?;
    Ok(newest
        .ids
        .into_iter()
        .next()
        .map_or_else(|| "0-0".to_owned(), |entry| entry.id))
}
