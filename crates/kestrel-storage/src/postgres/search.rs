//! The text search of [`PostgresStorage`]: the scope's newest messages first, then, in a bigger
//! scope, the whole of it with a `LIKE` pattern.

use super::messages::fetch_messages;
use super::{PostgresStorage, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::{MessageSearch, Scope, StoredMessage};

/// The `LIKE` pattern matching text that contains `needle` (backslash, `%` and `_` escaped).
fn like_pattern(needle: &str) -> String {
    let mut pattern = String::with_capacity(needle.len() + 2);
    pattern.push('%');
    for c in needle.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

pub(super) async fn search_messages(
    store: &PostgresStorage,
    search: MessageSearch,
) -> Result<Vec<StoredMessage>> {
    const OP: &str = "search_messages";
    let pattern = like_pattern(&codec::search_needle(&search.query));
    let limit = i64::from(search.limit);
    let mut conn = store.conn(OP).await?;
    let (key, recent, whole) = match &search.scope {
        Scope::Thread {
            thread_id,
            resource_id,
        } => {
            owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
            (
                thread_id.as_str(),
                sql::SEARCH_THREAD_RECENT,
                sql::SEARCH_THREAD,
            )
        }
        Scope::Resource { resource_id } => (
            resource_id.as_str(),
            sql::SEARCH_RESOURCE_RECENT,
            sql::SEARCH_RESOURCE,
        ),
    };
    // The newest messages first: a frequent term fills the limit there.
    let query = sqlx::query_as(recent)
        .bind(key)
        .bind(&pattern)
        .bind(limit)
        .bind(sql::SEARCH_WINDOW);
    let found = fetch_messages(&mut conn, query, OP).await?;
    if found.len() as i64 >= limit {
        return Ok(found);
    }
    let size: i64 = match &search.scope {
        Scope::Thread { .. } => sqlx::query_scalar(sql::THREAD_SIZE_BOUND).bind(key),
        Scope::Resource { .. } => sqlx::query_scalar(sql::COUNT_RESOURCE_UP_TO)
            .bind(key)
            .bind(sql::SEARCH_WINDOW + 1),
    }
    .fetch_one(&mut *conn)
    .await
    .map_err(err(OP))?;
    if size <= sql::SEARCH_WINDOW {
        return Ok(found);
    }
    // A bigger scope: the whole of it, planned for this pattern (the trigram index, if any).
    let query = sqlx::query_as(whole)
        .bind(key)
        .bind(pattern)
        .bind(limit)
        .persistent(false);
    fetch_messages(&mut conn, query, OP).await
}
