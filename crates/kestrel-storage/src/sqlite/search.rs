//! The text search of [`SqliteStorage`]: the recent messages scanned, then the older ones
//! through the FTS5 trigram index or, when it cannot narrow them down, scanned.

use rusqlite::{Connection, params};

use super::conn::Cost;
use super::rows::parse_messages;
use super::{SqliteStorage, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::{MessageSearch, Scope, StoredMessage};

/// Where the first phase of a search stopped: the oldest seq it scanned (thread scope), or the
/// last message it scanned in search order (resource scope: created_at, thread, seq).
enum Boundary {
    Seq(i64),
    Resource(i64, String, i64),
}

/// An FTS5 query for the trigram index matching the messages that contain `needle`'s rarest
/// trigrams (at most two, judged by how common their characters are in text: a third common one
/// would cost more to intersect than it saves in candidates), or `None` when
/// the needle is shorter than three characters. It selects a superset of the matches: every
/// candidate is checked against the text.
fn trigram_query(needle: &str) -> Option<String> {
    /// How common a character is in text, roughly: English letter frequencies, with spaces
    /// counted low because a trigram spanning a word boundary is only as common as its letters,
    /// and digits, punctuation and other characters lowest.
    fn commonness(c: char) -> u32 {
        match c {
            'e' => 12,
            't' => 9,
            'a' | 'o' => 8,
            'i' | 'n' => 7,
            's' | 'h' | 'r' => 6,
            'd' | 'l' => 4,
            'c' | 'u' | 'm' | 'w' | 'f' => 3,
            ' ' | 'g' | 'y' | 'p' | 'b' => 2,
            'v' | 'k' | ',' | '.' => 1,
            _ => 0,
        }
    }
    let chars: Vec<char> = needle.chars().collect();
    let mut trigrams: Vec<(u32, String)> = chars
        .windows(3)
        .map(|w| (w.iter().copied().map(commonness).sum(), w.iter().collect()))
        .collect();
    if trigrams.is_empty() {
        return None;
    }
    trigrams.sort();
    trigrams.dedup_by(|a, b| a.1 == b.1);
    let phrases: Vec<String> = trigrams
        .iter()
        .take(2)
        .map(|(_, t)| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    Some(phrases.join(" "))
}

/// A text search (see the phases in `sql.rs`), on one read transaction.
fn search_in(conn: &mut Connection, search: &MessageSearch) -> Result<Vec<StoredMessage>> {
    const OP: &str = "search_messages";
    let needle = codec::search_needle(&search.query);
    let limit = i64::from(search.limit);
    let tx = conn.transaction().map_err(err(OP))?;
    // Phase 1: the scope's newest messages, scanned. Most searches end here: a frequent term
    // fills the limit at once, and a small scope is scanned whole.
    let (mut found, boundary) = match &search.scope {
        Scope::Thread {
            thread_id,
            resource_id,
        } => {
            owned(&tx, thread_id, Some(resource_id), OP)?;
            let (json, scanned, oldest): (String, i64, Option<i64>) = tx
                .prepare_cached(sql::SEARCH_THREAD_RECENT)
                .and_then(|mut s| {
                    s.query_row(params![thread_id, needle, limit, sql::SEARCH_WINDOW], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                })
                .map_err(err(OP))?;
            let boundary = oldest.filter(|_| scanned > sql::SEARCH_WINDOW);
            (parse_messages(&json)?, boundary.map(Boundary::Seq))
        }
        Scope::Resource { resource_id } => {
            let row: (String, i64, Option<i64>, Option<String>, Option<i64>) = tx
                .prepare_cached(sql::SEARCH_RESOURCE_RECENT)
                .and_then(|mut s| {
                    s.query_row(
                        params![resource_id, needle, limit, sql::SEARCH_WINDOW],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                    )
                })
                .map_err(err(OP))?;
            let (json, scanned, created, thread, seq) = row;
            let boundary = match (created, thread, seq) {
                (Some(c), Some(t), Some(s)) if scanned > sql::SEARCH_WINDOW => {
                    Some(Boundary::Resource(c, t, s))
                }
                _ => None,
            };
            (parse_messages(&json)?, boundary)
        }
    };
    let Some(boundary) = boundary else {
        return Ok(found);
    };
    let remaining = limit - found.len() as i64;
    if remaining <= 0 {
        return Ok(found);
    }
    // Phase 2: the older messages through the trigram index, when the needle's rarest
    // trigrams narrow them down; phase 3: otherwise, scanned.
    let key = match &search.scope {
        Scope::Thread { thread_id, .. } => thread_id.as_str(),
        Scope::Resource { resource_id } => resource_id.as_str(),
    };
    let one = |statement: &str, params: &[&dyn rusqlite::ToSql]| -> Result<Option<String>> {
        tx.prepare_cached(statement)
            .and_then(|mut s| s.query_row(params, |r| r.get(0)))
            .map_err(err(OP))
    };
    let mut older = None;
    if let Some(fts) = trigram_query(&needle) {
        older = match &boundary {
            Boundary::Seq(seq) => one(
                sql::SEARCH_THREAD_INDEXED,
                params![key, needle, remaining, seq, fts, sql::SEARCH_CANDIDATES],
            )?,
            Boundary::Resource(created, thread, seq) => one(
                sql::SEARCH_RESOURCE_INDEXED,
                params![
                    key,
                    needle,
                    remaining,
                    created,
                    thread,
                    seq,
                    fts,
                    sql::SEARCH_CANDIDATES
                ],
            )?,
        };
    }
    let json = match older {
        Some(json) => json,
        None => {
            let json = match &boundary {
                Boundary::Seq(seq) => one(
                    sql::SEARCH_THREAD_OLDER,
                    params![key, needle, remaining, seq],
                )?,
                Boundary::Resource(created, thread, seq) => one(
                    sql::SEARCH_RESOURCE_OLDER,
                    params![key, needle, remaining, created, thread, seq],
                )?,
            };
            json.unwrap_or_else(|| "[]".to_owned())
        }
    };
    found.extend(parse_messages(&json)?);
    Ok(found)
}

pub(super) async fn search_messages(
    store: &SqliteStorage,
    search: MessageSearch,
) -> Result<Vec<StoredMessage>> {
    const OP: &str = "search_messages";
    store
        .conns
        .read(OP, Cost::Long, move |conn| search_in(conn, &search))
        .await
}

#[cfg(test)]
mod tests {
    use super::trigram_query;

    #[test]
    fn the_rarest_trigrams_are_queried() {
        assert_eq!(trigram_query("ab"), None);
        assert_eq!(
            trigram_query("message 7:").as_deref(),
            Some(r#"" 7:" "e 7""#)
        );
        // Quotes are doubled inside FTS5 strings.
        assert_eq!(
            trigram_query(r#"say "hi""#).as_deref(),
            Some(r#""y """ " ""h""#)
        );
    }
}
