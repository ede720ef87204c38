//! Every SQL statement of the SQLite backend.

use rusqlite::types::Value;

use crate::codec;
use crate::types::{Direction, RunFilter, ThreadOrder, ThreadOrderField};

macro_rules! thread_cols {
    () => {
        "id, resource_id, title, metadata, created_at, updated_at"
    };
}

/// Messages come back as one JSON array of
/// `[id, thread_id, resource_id, seq, role, parts, status, metadata, created_at]` (one row, one
/// hop through the driver's worker thread, whatever the count), ordered by `$order`, from the
/// rows `$from` selects out of `messages`.
macro_rules! messages_json {
    ($from:expr, $order:expr) => {
        concat!(
            "SELECT json_group_array(json_array(id, thread_id, resource_id, seq, role, json(parts), \
             status, json(metadata), created_at) ORDER BY ",
            $order,
            ") FROM (SELECT * FROM messages ",
            $from,
            ")"
        )
    };
}

macro_rules! run_cols {
    () => {
        "run_id, agent_id, thread_id, resource_id, status, snapshot, parent_run_id, version, \
         created_at, updated_at, lease_token"
    };
}

macro_rules! observation_cols {
    () => {
        "id, thread_id, resource_id, text, created_at, observed_up_to_seq, source_thread_id"
    };
}

// --- threads ---------------------------------------------------------------------------------

pub const INSERT_THREAD: &str = "INSERT INTO threads (id, resource_id, title, metadata, \
     created_at, updated_at, next_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
     ON CONFLICT (id) DO NOTHING";

pub const GET_THREAD: &str = concat!("SELECT ", thread_cols!(), " FROM threads WHERE id = ?1");

pub const THREAD_OWNER: &str = "SELECT resource_id, next_seq FROM threads WHERE id = ?1";

pub const UPDATE_THREAD: &str =
    "UPDATE threads SET title = ?2, metadata = ?3, updated_at = ?4 WHERE id = ?1";

pub const DELETE_THREAD_VECTORS: &str = "DELETE FROM vectors WHERE thread_id = ?1";

pub const DELETE_THREAD: &str = "DELETE FROM threads WHERE id = ?1";

/// Appends the WHERE clause and the order of a thread listing (resource and canonical metadata
/// filter, each only when given: every filter key must be present with equal canonical JSON
/// text) to `query`, which already selects from `threads t`.
pub fn push_thread_filter(query: &mut Dynamic, resource_id: Option<&str>, filter: Option<String>) {
    query.push(" WHERE 1 = 1");
    if let Some(resource_id) = resource_id {
        query
            .push(" AND t.resource_id = ")
            .bind(resource_id.to_owned());
    }
    if let Some(filter) = filter {
        query
            .push(" AND NOT EXISTS (SELECT 1 FROM json_each(")
            .bind(filter.clone())
            .push(") f WHERE (t.metadata -> f.fullkey) IS NOT (")
            .bind(filter)
            .push(" -> f.fullkey))");
    }
}

/// The ORDER BY of a thread listing.
pub fn thread_order(order: ThreadOrder) -> &'static str {
    match (order.field, order.direction) {
        (ThreadOrderField::CreatedAt, Direction::Asc) => " ORDER BY t.created_at ASC, t.id ASC",
        (ThreadOrderField::CreatedAt, Direction::Desc) => " ORDER BY t.created_at DESC, t.id DESC",
        (ThreadOrderField::UpdatedAt, Direction::Asc) => " ORDER BY t.updated_at ASC, t.id ASC",
        (ThreadOrderField::UpdatedAt, Direction::Desc) => " ORDER BY t.updated_at DESC, t.id DESC",
    }
}

pub const COUNT_THREADS: &str = "SELECT COUNT(*) FROM threads t";

pub const SELECT_THREADS: &str = concat!("SELECT ", thread_cols!(), " FROM threads t");

// --- messages --------------------------------------------------------------------------------

/// The first statement of an append: reserves the seqs of the batch's new messages (ids not
/// stored anywhere) on a thread owned by the resource, and returns the thread's new `next_seq`
/// with the stored messages of the batch as a JSON array of `[id, thread_id, seq, created_at]`.
/// No row: the thread is missing or owned by another resource.
///
/// ?1 thread, ?2 resource, ?3 JSON array of the batch's ids, ?4 now.
pub const RESERVE_SEQS: &str = "UPDATE threads SET next_seq = max(next_seq, \
     (SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE thread_id = ?1)) + \
     (SELECT count(*) FROM json_each(?3) j WHERE NOT EXISTS \
      (SELECT 1 FROM messages m WHERE m.id = j.value)), updated_at = ?4 \
     WHERE id = ?1 AND resource_id = ?2 \
     RETURNING next_seq, (SELECT json_group_array(json_array(m.id, m.thread_id, m.seq, m.created_at)) \
      FROM messages m WHERE m.id IN (SELECT value FROM json_each(?3)))";

/// The whole append when every message of the batch is new (the common case), in one statement
/// and so in one round trip: inserts the batch after the thread's last seq (or its `next_seq`,
/// when larger: seqs of deleted messages are not reused), on a thread owned by the resource,
/// unless one of the batch's ids is already stored anywhere. The `messages_touch_thread` trigger
/// moves the thread's `updated_at`. Returns the new seqs; no rows when the thread is missing,
/// owned by another resource, or an id is already stored (the transactional path sorts those
/// out). One statement is atomic and, being a write, takes the write lock before it reads, so
/// concurrent writers never share a seq.
///
/// ?1 thread, ?2 resource, ?3 JSON array of `[id, role, parts, status, metadata, search_text]`,
/// ?4 now.
pub const APPEND_NEW: &str = "WITH batch AS MATERIALIZED (SELECT j.key AS k, j.value ->> 0 AS id, \
     j.value ->> 1 AS role, j.value ->> 2 AS parts, j.value ->> 3 AS status, \
     j.value ->> 4 AS metadata, j.value ->> 5 AS search_text FROM json_each(?3) j), \
     base AS MATERIALIZED (SELECT max(next_seq, \
     (SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE thread_id = ?1)) AS next_seq \
     FROM threads WHERE id = ?1 AND resource_id = ?2 \
     AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id IN (SELECT id FROM batch))) \
     INSERT INTO messages (id, thread_id, resource_id, seq, role, parts, status, metadata, \
     search_text, created_at) \
     SELECT b.id, ?1, ?2, base.next_seq + b.k, b.role, b.parts, b.status, b.metadata, \
     b.search_text, ?4 FROM batch b, base ORDER BY b.k RETURNING seq";

/// [`APPEND_NEW`] for a batch of one message: the same parameters, the same checks and seq.
pub const APPEND_ONE: &str = "INSERT INTO messages (id, thread_id, resource_id, seq, role, \
     parts, status, metadata, search_text, created_at) \
     SELECT ?3 ->> '$[0][0]', ?1, ?2, \
     max(next_seq, (SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE thread_id = ?1)), \
     ?3 ->> '$[0][1]', ?3 ->> '$[0][2]', ?3 ->> '$[0][3]', ?3 ->> '$[0][4]', ?3 ->> '$[0][5]', ?4 \
     FROM threads WHERE id = ?1 AND resource_id = ?2 \
     AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = ?3 ->> '$[0][0]') RETURNING seq";

/// The ?3 + 1 messages of thread ?1 before seq ?2, newest first, as rows (read after an append,
/// on the writer, to return the history the new messages follow). Rows, not one JSON array:
/// the array would have SQLite parse and print every message's parts once more, for the run
/// to parse them again (a third of the read).
pub const HISTORY_BEFORE: &str = "SELECT id, thread_id, resource_id, seq, role, parts, status, \
     metadata, created_at FROM messages WHERE thread_id = ?1 AND seq < ?2 \
     ORDER BY seq DESC LIMIT ?3 + 1";

/// Inserts a batch in one statement. ?1 thread, ?2 resource, ?3 JSON array of
/// `[id, seq, role, parts, status, metadata, search_text, created_at]`.
pub const INSERT_MESSAGES: &str = "INSERT INTO messages (id, thread_id, resource_id, seq, role, \
     parts, status, metadata, search_text, created_at) \
     SELECT j.value ->> 0, ?1, ?2, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, \
     j.value ->> 5, j.value ->> 6, j.value ->> 7 FROM json_each(?3) j";

pub const REPLACE_MESSAGE: &str = "UPDATE messages SET role = ?2, parts = ?3, status = ?4, \
     metadata = ?5, search_text = ?6 WHERE id = ?1";

/// A range of a thread's messages with the thread's owner, in one statement; no row when the
/// thread does not exist.
///
/// ?1 thread, ?2 exclusive lower seq, ?3 exclusive upper seq, ?4 limit (-1: none).
macro_rules! owned_range {
    ($order:literal) => {
        concat!(
            "SELECT t.resource_id, (",
            messages_json!(
                concat!(
                    "WHERE thread_id = ?1 AND seq > ?2 AND seq < ?3 ORDER BY seq ",
                    $order,
                    " LIMIT ?4"
                ),
                "seq"
            ),
            ") FROM threads t WHERE t.id = ?1"
        )
    };
}

pub const OWNED_RANGE_ASC: &str = owned_range!("ASC");

pub const OWNED_RANGE_DESC: &str = owned_range!("DESC");

pub const PAGE_MESSAGES: &str = messages_json!(
    "WHERE thread_id = ?1 ORDER BY seq ASC LIMIT ?2 OFFSET ?3",
    "seq"
);

pub const MESSAGE_IDS: &str = "SELECT id FROM messages WHERE thread_id = ?1 ORDER BY seq";

/// ?1 new thread, ?2 JSON array of `[old id, new id, new seq]`.
pub const COPY_MESSAGES: &str = "INSERT INTO messages (id, thread_id, resource_id, seq, role, \
     parts, status, metadata, search_text, created_at) \
     SELECT c.value ->> 1, ?1, m.resource_id, c.value ->> 2, m.role, m.parts, m.status, \
     m.metadata, m.search_text, m.created_at \
     FROM json_each(?2) c JOIN messages m ON m.id = (c.value ->> 0)";

pub const COUNT_MESSAGES: &str = "SELECT COUNT(*) FROM messages WHERE thread_id = ?1";

/// ?1 JSON array of message ids.
pub const GET_MESSAGES: &str = messages_json!(
    "WHERE id IN (SELECT value FROM json_each(?1))",
    "thread_id, seq"
);

/// ?1 thread, ?2 JSON array of message ids.
pub const DELETE_MESSAGES: &str = "DELETE FROM messages WHERE thread_id = ?1 \
     AND id IN (SELECT value FROM json_each(?2)) RETURNING id";

/// ?1 JSON array of message ids.
pub const DELETE_MESSAGE_VECTORS: &str =
    "DELETE FROM vectors WHERE message_id IN (SELECT value FROM json_each(?1))";

pub const TOUCH_THREAD: &str = "UPDATE threads SET updated_at = ?2 WHERE id = ?1";

// Text search runs in up to three phases (see `SqliteStorage::search_messages`): the newest
// `window` messages of the scope are scanned; if that did not find `limit` matches, the older
// messages are searched through the trigram index (candidates: the messages holding the needle's
// rarest trigrams, plus those the index does not hold yet), unless the index gives too many
// candidates, in which case the older messages are scanned too. Every row is checked with `instr`
// on the lowercased text, so the results are the same whichever phase finds them.

/// The messages the trigram index does not hold yet.
macro_rules! unindexed {
    () => {
        "SELECT rowid FROM messages WHERE rowid > (SELECT indexed_up_to FROM search_index_state)"
    };
}

/// Phase 1 in a thread: the matches among its newest ?4 messages, how many messages the thread
/// has (counting up to ?4 + 1: more than ?4 means older ones remain), and the oldest seq of the
/// window.
///
/// ?1 thread, ?2 lowercased needle, ?3 limit, ?4 window.
pub const SEARCH_THREAD_RECENT: &str = concat!(
    "SELECT (",
    messages_json!(
        "WHERE rowid IN (SELECT rowid FROM messages WHERE thread_id = ?1 ORDER BY seq DESC \
         LIMIT ?4) AND instr(search_text, ?2) > 0 ORDER BY seq DESC LIMIT ?3",
        "seq DESC"
    ),
    "), (SELECT count(*) FROM (SELECT 1 FROM messages WHERE thread_id = ?1 LIMIT ?4 + 1)), \
     (SELECT min(seq) FROM (SELECT seq FROM messages WHERE thread_id = ?1 \
     ORDER BY seq DESC LIMIT ?4))"
);

/// Phase 2 in a thread, through the index: the matches older than seq ?4 among the candidates
/// of the FTS5 query ?5, or NULL when there are more than ?6 candidates. (The `+` keeps SQLite
/// from walking the thread's `(thread_id, seq)` index instead of looking the candidates up.)
pub const SEARCH_THREAD_INDEXED: &str = concat!(
    "WITH candidates AS MATERIALIZED (SELECT rowid AS r FROM messages_fts \
     WHERE messages_fts MATCH ?5 LIMIT ?6 + 1) \
     SELECT CASE WHEN (SELECT count(*) FROM candidates) <= ?6 THEN (",
    messages_json!(
        concat!(
            "WHERE rowid IN (SELECT r FROM candidates UNION ALL ",
            unindexed!(),
            ") AND +thread_id = ?1 AND +seq < ?4 AND instr(search_text, ?2) > 0 \
             ORDER BY seq DESC LIMIT ?3"
        ),
        "seq DESC"
    ),
    ") END"
);

/// Phase 2 or 3 in a thread, scanning: the matches older than seq ?4 (all of them with
/// `i64::MAX`).
pub const SEARCH_THREAD_OLDER: &str = messages_json!(
    "WHERE thread_id = ?1 AND seq < ?4 AND instr(search_text, ?2) > 0 ORDER BY seq DESC LIMIT ?3",
    "seq DESC"
);

/// The order of a resource's messages in a search: newest first, then by thread and seq.
macro_rules! resource_order {
    () => {
        "created_at DESC, thread_id ASC, seq DESC"
    };
}

/// The messages of a resource after (in the `resource_order!`) the one at (?4 created_at,
/// ?5 thread, ?6 seq).
macro_rules! resource_after {
    () => {
        "resource_id = ?1 AND created_at <= ?4 \
         AND (created_at < ?4 OR thread_id > ?5 OR (thread_id = ?5 AND seq < ?6))"
    };
}

/// `resource_after!` for looking candidates up by rowid (no index on the scope's columns).
macro_rules! resource_after_unindexed {
    () => {
        "+resource_id = ?1 AND +created_at <= ?4 \
         AND (created_at < ?4 OR thread_id > ?5 OR (thread_id = ?5 AND seq < ?6))"
    };
}

/// Phase 1 over a resource: the matches among its newest ?4 messages, how many messages the
/// resource has (counting up to ?4 + 1), and the last of the window (created_at, thread, seq).
pub const SEARCH_RESOURCE_RECENT: &str = concat!(
    "SELECT (",
    messages_json!(
        concat!(
            "WHERE rowid IN (SELECT rowid FROM messages WHERE resource_id = ?1 ORDER BY ",
            resource_order!(),
            " LIMIT ?4) AND instr(search_text, ?2) > 0 ORDER BY ",
            resource_order!(),
            " LIMIT ?3"
        ),
        resource_order!()
    ),
    "), (SELECT count(*) FROM (SELECT 1 FROM messages WHERE resource_id = ?1 LIMIT ?4 + 1)), \
     last.created_at, last.thread_id, last.seq \
     FROM (SELECT 1) LEFT JOIN (SELECT created_at, thread_id, seq FROM messages \
     WHERE resource_id = ?1 ORDER BY ",
    resource_order!(),
    " LIMIT 1 OFFSET ?4 - 1) last"
);

/// Phase 2 over a resource, through the index: the matches after the boundary (?4, ?5, ?6)
/// among the candidates of the FTS5 query ?7, or NULL when there are more than ?8 candidates.
pub const SEARCH_RESOURCE_INDEXED: &str = concat!(
    "WITH candidates AS MATERIALIZED (SELECT rowid AS r FROM messages_fts \
     WHERE messages_fts MATCH ?7 LIMIT ?8 + 1) \
     SELECT CASE WHEN (SELECT count(*) FROM candidates) <= ?8 THEN (",
    messages_json!(
        concat!(
            "WHERE rowid IN (SELECT r FROM candidates UNION ALL ",
            unindexed!(),
            ") AND ",
            resource_after_unindexed!(),
            " AND instr(search_text, ?2) > 0 ORDER BY ",
            resource_order!(),
            " LIMIT ?3"
        ),
        resource_order!()
    ),
    ") END"
);

/// Phase 2 or 3 over a resource, scanning: the matches after the boundary (?4, ?5, ?6).
pub const SEARCH_RESOURCE_OLDER: &str = messages_json!(
    concat!(
        "WHERE ",
        resource_after!(),
        " AND instr(search_text, ?2) > 0 ORDER BY ",
        resource_order!(),
        " LIMIT ?3"
    ),
    resource_order!()
);

/// How many of a scope's newest messages a search scans before it turns to the index.
pub const SEARCH_WINDOW: i64 = 1000;

/// How many index candidates a search takes before it scans instead.
pub const SEARCH_CANDIDATES: i64 = 10_000;

/// Adds the messages above the mark to the trigram index and moves the mark (run in a write
/// transaction; see the 0003 migration).
pub const CATCH_UP_SEARCH_INDEX: &str = "INSERT INTO messages_fts (rowid, search_text) \
     SELECT rowid, search_text FROM messages \
     WHERE rowid > (SELECT indexed_up_to FROM search_index_state) AND search_text <> ''; \
     UPDATE search_index_state SET indexed_up_to = \
     max(indexed_up_to, (SELECT coalesce(max(rowid), 0) FROM messages))";

// --- working memory and observed seq ---------------------------------------------------------

pub const GET_THREAD_MEMORY: &str = "SELECT working_memory FROM threads WHERE id = ?1";

pub const SET_THREAD_MEMORY: &str = "UPDATE threads SET working_memory = ?2 WHERE id = ?1";

pub const GET_RESOURCE_MEMORY: &str = "SELECT working_memory FROM resources WHERE id = ?1";

pub const SET_RESOURCE_MEMORY: &str = "INSERT INTO resources (id, working_memory, updated_at) \
     VALUES (?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET \
     working_memory = excluded.working_memory, updated_at = excluded.updated_at";

pub const GET_OBSERVED_SEQ: &str = "SELECT observed_up_to_seq FROM threads WHERE id = ?1";

pub const SET_OBSERVED_SEQ: &str = "UPDATE threads SET observed_up_to_seq = ?2 WHERE id = ?1";

// --- runs ------------------------------------------------------------------------------------

pub const INSERT_RUN: &str = concat!(
    "INSERT INTO runs (",
    run_cols!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?8, ?9) ON CONFLICT (run_id) DO NOTHING"
);

/// Compare-and-set: ?9 the expected version; ?10 the lease token (`NULL` keeps the stored).
pub const UPDATE_RUN: &str = "UPDATE runs SET agent_id = ?2, thread_id = ?3, resource_id = ?4, \
     status = ?5, snapshot = ?6, parent_run_id = ?7, updated_at = ?8, version = version + 1, \
     lease_token = COALESCE(?10, lease_token) \
     WHERE run_id = ?1 AND version = ?9 RETURNING version, created_at";

/// Raises the run's fence to ?2 unless it is above: returns the token when it was raised
/// (or equal), no row when the fence is above ?2.
pub const RAISE_FENCE: &str = "INSERT INTO run_fences (run_id, token) VALUES (?1, ?2) \
     ON CONFLICT (run_id) DO UPDATE SET token = excluded.token \
     WHERE excluded.token >= run_fences.token RETURNING token";

pub const FENCE_TOKEN: &str = "SELECT token FROM run_fences WHERE run_id = ?1";

pub const RUN_VERSION: &str = "SELECT version FROM runs WHERE run_id = ?1";

/// What a save compares before it picks its statement: ?1 the run.
pub const RUN_STORED: &str = "SELECT version, agent_id, thread_id, resource_id, status, \
     parent_run_id FROM runs WHERE run_id = ?1";

/// A save that changes neither the run's status nor whose it is: SQLite rewrites an index
/// entry when the statement sets one of its columns (even to the value it has), so this sets
/// none of them and writes the table's page alone. Parameters as in [`UPDATE_RUN`].
pub const UPDATE_RUN_SNAPSHOT: &str = "UPDATE runs SET snapshot = ?6, updated_at = ?8, \
     version = version + 1, lease_token = COALESCE(?10, lease_token) \
     WHERE run_id = ?1 AND version = ?9 RETURNING version, created_at";

/// A save that changes the run's status but not whose it is: one index rewritten
/// (`runs_by_status`). Parameters as in [`UPDATE_RUN`].
pub const UPDATE_RUN_STATUS: &str = "UPDATE runs SET status = ?5, snapshot = ?6, \
     updated_at = ?8, version = version + 1, lease_token = COALESCE(?10, lease_token) \
     WHERE run_id = ?1 AND version = ?9 RETURNING version, created_at";

pub const GET_RUN: &str = concat!("SELECT ", run_cols!(), " FROM runs WHERE run_id = ?1");

pub const DELETE_RUN: &str = "DELETE FROM runs WHERE run_id = ?1";

pub const COUNT_RUNS: &str = "SELECT COUNT(*) FROM runs";

pub const SELECT_RUNS: &str = concat!("SELECT ", run_cols!(), " FROM runs");

pub const RUN_ORDER: &str = " ORDER BY created_at DESC, run_id DESC";

/// Appends the WHERE clause of a run listing (only the filters given) to `query`.
pub fn push_run_filter(query: &mut Dynamic, filter: &RunFilter) {
    query.push(" WHERE 1 = 1");
    let columns = [
        ("agent_id", filter.agent_id.as_deref()),
        ("thread_id", filter.thread_id.as_deref()),
        ("resource_id", filter.resource_id.as_deref()),
        ("parent_run_id", filter.parent_run_id.as_deref()),
    ];
    for (column, value) in columns {
        if let Some(value) = value {
            query
                .push(&format!(" AND {column} = "))
                .bind(value.to_owned());
        }
    }
    if !filter.statuses.is_empty() {
        query.push(" AND status IN (");
        for (i, status) in filter.statuses.iter().enumerate() {
            if i > 0 {
                query.push(", ");
            }
            query.bind(status.as_str().to_owned());
        }
        query.push(")");
    }
    if let Some(from) = filter.created_from {
        query
            .push(" AND created_at >= ")
            .bind(codec::to_micros(from));
    }
    if let Some(to) = filter.created_to {
        query.push(" AND created_at < ").bind(codec::to_micros(to));
    }
}

/// A statement assembled at run time (listing filters) with its bound values, in order.
#[derive(Debug, Clone, Default)]
pub struct Dynamic {
    /// The SQL text, with a `?` per bound value.
    pub sql: String,
    /// The values of the `?`s.
    pub values: Vec<Value>,
}

impl Dynamic {
    /// A statement starting with `sql`.
    pub fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_owned(),
            values: Vec::new(),
        }
    }

    /// Appends SQL text.
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends a `?` bound to `value`.
    pub fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        self.sql.push('?');
        self.values.push(value.into());
        self
    }
}

// --- observations ----------------------------------------------------------------------------

pub const INSERT_OBSERVATION: &str = concat!(
    "INSERT INTO observations (",
    observation_cols!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
);

pub const LIST_THREAD_OBSERVATIONS: &str = concat!(
    "SELECT ",
    observation_cols!(),
    " FROM observations WHERE thread_id = ?1 ORDER BY ord"
);

pub const LIST_RESOURCE_OBSERVATIONS: &str = concat!(
    "SELECT ",
    observation_cols!(),
    " FROM observations WHERE thread_id IS NULL AND resource_id = ?1 ORDER BY ord"
);

pub const DELETE_THREAD_OBSERVATIONS: &str = "DELETE FROM observations WHERE thread_id = ?1";

pub const DELETE_RESOURCE_OBSERVATIONS: &str =
    "DELETE FROM observations WHERE thread_id IS NULL AND resource_id = ?1";

// --- vectors ---------------------------------------------------------------------------------

pub const INSERT_INDEX: &str = "INSERT INTO vector_indexes (name, dimension, created_at) \
     VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING";

pub const INDEX_DIMENSION: &str = "SELECT dimension FROM vector_indexes WHERE name = ?1";

pub const UPSERT_VECTOR: &str = "INSERT INTO vectors (index_name, id, embedding, metadata, \
     thread_id, resource_id, message_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
     ON CONFLICT (index_name, id) DO UPDATE SET embedding = excluded.embedding, \
     metadata = excluded.metadata, thread_id = excluded.thread_id, \
     resource_id = excluded.resource_id, message_id = excluded.message_id";

/// ?1 index.
pub const SCAN_VECTORS: &str = "SELECT id, embedding, metadata FROM vectors WHERE index_name = ?1";

/// ?1 index, ?2 thread, ?3 resource (or NULL).
pub const SCAN_THREAD_VECTORS: &str = "SELECT id, embedding, metadata FROM vectors \
     WHERE thread_id = ?2 AND index_name = ?1 AND (?3 IS NULL OR resource_id = ?3)";

/// ?1 index, ?2 resource.
pub const SCAN_RESOURCE_VECTORS: &str = "SELECT id, embedding, metadata FROM vectors \
     WHERE index_name = ?1 AND resource_id = ?2";

/// ?1 index, ?2 JSON array of ids.
pub const DELETE_VECTORS: &str = "DELETE FROM vectors WHERE index_name = ?1 \
     AND id IN (SELECT value FROM json_each(?2))";

// --- queued messages -------------------------------------------------------------------------

macro_rules! queued_cols {
    () => {
        "id, run_id, agent_id, thread_id, resource_id, message, seq, created_at"
    };
}

/// A taken id inserts nothing (and is reported as such).
pub const INSERT_QUEUED: &str = "INSERT INTO queued_messages \
     (id, run_id, agent_id, thread_id, resource_id, message, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (id) DO NOTHING";

pub const LIST_QUEUED: &str = concat!(
    "SELECT ",
    queued_cols!(),
    " FROM queued_messages WHERE thread_id = ?1 ORDER BY seq"
);

pub const DELETE_QUEUED: &str = "DELETE FROM queued_messages WHERE id = ?1";

/// Each thread with a queue, with the agent of its oldest message, oldest queue first.
pub const QUEUED_THREADS: &str = "SELECT q.agent_id, q.thread_id, q.resource_id \
     FROM queued_messages q \
     WHERE q.seq = (SELECT min(seq) FROM queued_messages WHERE thread_id = q.thread_id) \
     ORDER BY q.seq";
