//! Every SQL statement of the PostgreSQL backend. Tables are unqualified: the connection's
//! `search_path` names the schema.

use sqlx::{Postgres, QueryBuilder};

use crate::types::{Direction, RunFilter, ThreadOrder, ThreadOrderField};

macro_rules! thread_cols {
    () => {
        "id, resource_id, title, metadata, created_at, updated_at"
    };
}

macro_rules! message_cols {
    () => {
        "id, thread_id, resource_id, seq, role, parts, status, metadata, created_at"
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

// --- set-up ----------------------------------------------------------------------------------

/// Whether the pgvector extension is installed in this database.
pub const HAS_PGVECTOR: &str =
    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')";

// --- threads ---------------------------------------------------------------------------------

pub const INSERT_THREAD: &str = "INSERT INTO threads (id, resource_id, title, metadata, \
     created_at, updated_at, next_seq) VALUES ($1, $2, $3, $4::jsonb, $5, $5, $6) \
     ON CONFLICT (id) DO NOTHING";

pub const GET_THREAD: &str = concat!("SELECT ", thread_cols!(), " FROM threads WHERE id = $1");

pub const LOCK_THREAD: &str = concat!(
    "SELECT ",
    thread_cols!(),
    " FROM threads WHERE id = $1 FOR UPDATE"
);

pub const THREAD_OWNER: &str = "SELECT resource_id FROM threads WHERE id = $1";

/// Takes the thread's row lock: appends to one thread are serialised on it.
pub const LOCK_THREAD_OWNER: &str = "SELECT resource_id FROM threads WHERE id = $1 FOR UPDATE";

pub const UPDATE_THREAD: &str =
    "UPDATE threads SET title = $2, metadata = $3::jsonb, updated_at = $4 WHERE id = $1";

pub const DELETE_THREAD_VECTORS: &str = "DELETE FROM vectors WHERE thread_id = $1";

pub const DELETE_THREAD: &str = "DELETE FROM threads WHERE id = $1";

pub const COUNT_THREADS: &str = "SELECT COUNT(*) FROM threads t";

pub const SELECT_THREADS: &str = concat!("SELECT ", thread_cols!(), " FROM threads t");

/// Appends the WHERE clause of a thread listing (resource and canonical metadata filter, each
/// only when given) to `query`. Every filter key must be present with an equal JSON value; the
/// containment test lets the GIN index narrow the rows first.
pub fn push_thread_filter<'a>(
    query: &mut QueryBuilder<'a, Postgres>,
    resource_id: Option<&'a str>,
    filter: Option<String>,
) {
    query.push(" WHERE TRUE");
    if let Some(resource_id) = resource_id {
        query.push(" AND t.resource_id = ").push_bind(resource_id);
    }
    if let Some(filter) = filter {
        query
            .push(" AND t.metadata @> ")
            .push_bind(filter.clone())
            .push("::jsonb AND NOT EXISTS (SELECT 1 FROM jsonb_each(")
            .push_bind(filter)
            .push("::jsonb) f WHERE t.metadata -> f.key IS DISTINCT FROM f.value)");
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

// --- messages --------------------------------------------------------------------------------

pub const FIND_MESSAGES: &str =
    "SELECT id, thread_id, seq, created_at FROM messages WHERE id = ANY($1)";

/// Reserves `$2` seqs; returns the first.
pub const BUMP_NEXT_SEQ: &str = "UPDATE threads SET next_seq = next_seq + $2, updated_at = $3 \
     WHERE id = $1 RETURNING next_seq - $2";

/// One statement for a whole batch: parallel arrays, one element per new message.
pub const INSERT_MESSAGES: &str = "INSERT INTO messages (id, thread_id, resource_id, seq, role, \
     parts, status, metadata, search_text, created_at) \
     SELECT m.id, $1, $2, m.seq, m.role, m.parts::jsonb, m.status, m.metadata::jsonb, \
     m.search_text, m.created_at \
     FROM UNNEST($3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], \
     $9::text[], $10::timestamptz[]) \
     AS m(id, seq, role, parts, status, metadata, search_text, created_at)";

/// The whole append when every message of the batch is new (the common case), in one statement:
/// bumps the thread's `next_seq` under its row lock (only for a thread owned by the resource and
/// when none of the ids is stored) and inserts the batch after it. Returns the new seqs; no rows
/// when nothing was inserted. A concurrent append of the same ids can still make the insert fail
/// with a unique violation; the caller then takes the transactional path.
///
/// $1 thread, $2 resource, then parallel arrays of ids, roles, parts, statuses, metadata and
/// search texts, $9 now.
pub const APPEND_NEW: &str = "WITH base AS (UPDATE threads \
     SET next_seq = next_seq + cardinality($3::text[]), updated_at = $9 \
     WHERE id = $1 AND resource_id = $2 \
     AND NOT EXISTS (SELECT 1 FROM messages WHERE id = ANY($3::text[])) \
     RETURNING next_seq - cardinality($3::text[]) AS first_seq) \
     INSERT INTO messages (id, thread_id, resource_id, seq, role, parts, status, metadata, \
     search_text, created_at) \
     SELECT m.id, $1, $2, base.first_seq + m.k - 1, m.role, m.parts::jsonb, m.status, \
     m.metadata::jsonb, m.search_text, $9 \
     FROM base, UNNEST($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) \
     WITH ORDINALITY AS m(id, role, parts, status, metadata, search_text, k) \
     RETURNING seq";

pub const REPLACE_MESSAGE: &str = "UPDATE messages SET role = $2, parts = $3::jsonb, \
     status = $4, metadata = $5::jsonb, search_text = $6 WHERE id = $1";

/// $1 thread, $2 exclusive lower seq, $3 exclusive upper seq, $4 limit (NULL: none).
pub const RANGE_ASC: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE thread_id = $1 AND seq > $2 AND seq < $3 ORDER BY seq ASC LIMIT $4"
);

pub const RANGE_DESC: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE thread_id = $1 AND seq > $2 AND seq < $3 ORDER BY seq DESC LIMIT $4"
);

pub const PAGE_MESSAGES: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE thread_id = $1 ORDER BY seq ASC LIMIT $2 OFFSET $3"
);

pub const MESSAGE_IDS: &str = "SELECT id FROM messages WHERE thread_id = $1 ORDER BY seq";

/// $1 new thread, then parallel arrays of old ids, new ids and new seqs.
pub const COPY_MESSAGES: &str = "INSERT INTO messages (id, thread_id, resource_id, seq, role, \
     parts, status, metadata, search_text, created_at) \
     SELECT c.new_id, $1, m.resource_id, c.seq, m.role, m.parts, m.status, m.metadata, \
     m.search_text, m.created_at \
     FROM UNNEST($2::text[], $3::text[], $4::bigint[]) AS c(old_id, new_id, seq) \
     JOIN messages m ON m.id = c.old_id";

pub const COUNT_MESSAGES: &str = "SELECT COUNT(*) FROM messages WHERE thread_id = $1";

pub const GET_MESSAGES: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE id = ANY($1) ORDER BY thread_id, seq"
);

pub const DELETE_MESSAGES: &str =
    "DELETE FROM messages WHERE thread_id = $1 AND id = ANY($2) RETURNING id";

pub const DELETE_MESSAGE_VECTORS: &str = "DELETE FROM vectors WHERE message_id = ANY($1)";

pub const TOUCH_THREAD: &str = "UPDATE threads SET updated_at = $2 WHERE id = $1";

// Text search (see `PostgresStorage::search_messages`): the scope's newest `SEARCH_WINDOW`
// messages are scanned first, in index order. That is where a frequent term fills the limit, and
// it covers most scopes whole: the planner would otherwise be tempted by the `pg_trgm` index even
// where rechecking its candidates all over the table costs more than scanning the scope. Only a
// bigger scope is then searched whole, planned for the pattern (the trigram index, if any).

/// How many of a scope's newest messages a search scans before it searches the whole scope.
pub const SEARCH_WINDOW: i64 = 10_000;

/// $1 thread: an upper bound of its message count.
pub const THREAD_SIZE_BOUND: &str = "SELECT next_seq - 1 FROM threads WHERE id = $1";

/// $1 resource, $2 bound: the resource's message count, counting up to the bound along its
/// index.
pub const COUNT_RESOURCE_UP_TO: &str = "SELECT count(*) FROM (SELECT 1 FROM messages \
     WHERE resource_id = $1 ORDER BY created_at DESC, thread_id ASC, seq DESC LIMIT $2) c";

/// $1 thread, $2 LIKE pattern, $3 limit, $4 window: the matches among the newest messages.
pub const SEARCH_THREAD_RECENT: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM (SELECT * FROM messages WHERE thread_id = $1 ORDER BY seq DESC LIMIT $4) w \
     WHERE search_text LIKE $2 ORDER BY seq DESC LIMIT $3"
);

/// $1 resource, $2 LIKE pattern, $3 limit, $4 window: the matches among the newest messages.
pub const SEARCH_RESOURCE_RECENT: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM (SELECT * FROM messages WHERE resource_id = $1 \
     ORDER BY created_at DESC, thread_id ASC, seq DESC LIMIT $4) w \
     WHERE search_text LIKE $2 ORDER BY created_at DESC, thread_id ASC, seq DESC LIMIT $3"
);

/// $1 thread, $2 the LIKE pattern of the lowercased needle (see `like_pattern`), $3 limit.
///
/// `LIKE '%needle%'` (rather than `strpos`) lets the planner use the `pg_trgm` index when it
/// exists; it is sent unprepared so every search is planned for its own pattern.
pub const SEARCH_THREAD: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE thread_id = $1 AND search_text LIKE $2 \
     ORDER BY seq DESC LIMIT $3"
);

/// $1 resource, $2 the LIKE pattern, $3 limit.
pub const SEARCH_RESOURCE: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE resource_id = $1 AND search_text LIKE $2 \
     ORDER BY created_at DESC, thread_id ASC, seq DESC LIMIT $3"
);

// --- working memory and observed seq ---------------------------------------------------------

pub const GET_THREAD_MEMORY: &str = "SELECT working_memory FROM threads WHERE id = $1";

pub const SET_THREAD_MEMORY: &str = "UPDATE threads SET working_memory = $2 WHERE id = $1";

pub const GET_RESOURCE_MEMORY: &str = "SELECT working_memory FROM resources WHERE id = $1";

pub const SET_RESOURCE_MEMORY: &str = "INSERT INTO resources (id, working_memory, updated_at) \
     VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET \
     working_memory = excluded.working_memory, updated_at = excluded.updated_at";

pub const GET_OBSERVED_SEQ: &str = "SELECT observed_up_to_seq FROM threads WHERE id = $1";

pub const SET_OBSERVED_SEQ: &str = "UPDATE threads SET observed_up_to_seq = $2 WHERE id = $1";

// --- runs ------------------------------------------------------------------------------------

pub const INSERT_RUN: &str = concat!(
    "INSERT INTO runs (",
    run_cols!(),
    ") VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, 1, $8, $8, $9) ON CONFLICT (run_id) DO NOTHING"
);

/// Compare-and-set: $9 the expected version; $10 the lease token (`NULL` keeps the stored).
pub const UPDATE_RUN: &str = "UPDATE runs SET agent_id = $2, thread_id = $3, resource_id = $4, \
     status = $5, snapshot = $6::jsonb, parent_run_id = $7, updated_at = $8, \
     version = version + 1, lease_token = COALESCE($10, lease_token) \
     WHERE run_id = $1 AND version = $9 RETURNING version, created_at";

/// Raises the run's fence to $2 unless it is above: returns the token when it was raised
/// (or equal), no row when the fence is above $2.
pub const RAISE_FENCE: &str = "INSERT INTO run_fences (run_id, token) VALUES ($1, $2) \
     ON CONFLICT (run_id) DO UPDATE SET token = excluded.token \
     WHERE excluded.token >= run_fences.token RETURNING token";

pub const FENCE_TOKEN: &str = "SELECT token FROM run_fences WHERE run_id = $1";

pub const RUN_VERSION: &str = "SELECT version FROM runs WHERE run_id = $1";

/// The columns of a `runs` row as read: the snapshot as text.
macro_rules! run_select_cols {
    () => {
        "run_id, agent_id, thread_id, resource_id, status, snapshot::text AS snapshot, \
         parent_run_id, version, created_at, updated_at, lease_token"
    };
}

pub const GET_RUN: &str = concat!(
    "SELECT ",
    run_select_cols!(),
    " FROM runs WHERE run_id = $1"
);

pub const DELETE_RUN: &str = "DELETE FROM runs WHERE run_id = $1";

pub const COUNT_RUNS: &str = "SELECT COUNT(*) FROM runs";

pub const SELECT_RUNS: &str = concat!("SELECT ", run_select_cols!(), " FROM runs");

pub const RUN_ORDER: &str = " ORDER BY created_at DESC, run_id DESC";

/// Appends the WHERE clause of a run listing (only the filters given) to `query`.
pub fn push_run_filter<'a>(query: &mut QueryBuilder<'a, Postgres>, filter: &'a RunFilter) {
    query.push(" WHERE TRUE");
    let columns = [
        ("agent_id", filter.agent_id.as_deref()),
        ("thread_id", filter.thread_id.as_deref()),
        ("resource_id", filter.resource_id.as_deref()),
        ("parent_run_id", filter.parent_run_id.as_deref()),
    ];
    for (column, value) in columns {
        if let Some(value) = value {
            query
                .push(format_args!(" AND {column} = "))
                .push_bind(value);
        }
    }
    if !filter.statuses.is_empty() {
        let statuses: Vec<&'static str> = filter.statuses.iter().map(|s| s.as_str()).collect();
        query
            .push(" AND status = ANY(")
            .push_bind(statuses)
            .push(")");
    }
    if let Some(from) = filter.created_from {
        query.push(" AND created_at >= ").push_bind(from);
    }
    if let Some(to) = filter.created_to {
        query.push(" AND created_at < ").push_bind(to);
    }
}

// --- observations ----------------------------------------------------------------------------

pub const INSERT_OBSERVATION: &str = concat!(
    "INSERT INTO observations (",
    observation_cols!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
);

pub const LIST_THREAD_OBSERVATIONS: &str = concat!(
    "SELECT ",
    observation_cols!(),
    " FROM observations WHERE thread_id = $1 ORDER BY ord"
);

pub const LIST_RESOURCE_OBSERVATIONS: &str = concat!(
    "SELECT ",
    observation_cols!(),
    " FROM observations WHERE thread_id IS NULL AND resource_id = $1 ORDER BY ord"
);

pub const DELETE_THREAD_OBSERVATIONS: &str = "DELETE FROM observations WHERE thread_id = $1";

pub const DELETE_RESOURCE_OBSERVATIONS: &str =
    "DELETE FROM observations WHERE thread_id IS NULL AND resource_id = $1";

// --- vectors ---------------------------------------------------------------------------------

pub const INSERT_INDEX: &str = "INSERT INTO vector_indexes (name, dimension, created_at) \
     VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING";

pub const INDEX_DIMENSION: &str = "SELECT dimension FROM vector_indexes WHERE name = $1";

pub const UPSERT_VECTOR: &str = "INSERT INTO vectors (index_name, id, embedding, metadata, \
     thread_id, resource_id, message_id) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7) \
     ON CONFLICT (index_name, id) DO UPDATE SET embedding = excluded.embedding, \
     metadata = excluded.metadata, thread_id = excluded.thread_id, \
     resource_id = excluded.resource_id, message_id = excluded.message_id";

/// $1 index.
pub const SCAN_VECTORS: &str = "SELECT id, embedding, metadata FROM vectors WHERE index_name = $1";

/// $1 index, $2 thread, $3 resource (or NULL).
pub const SCAN_THREAD_VECTORS: &str = "SELECT id, embedding, metadata FROM vectors \
     WHERE thread_id = $2 AND index_name = $1 AND ($3::text IS NULL OR resource_id = $3)";

/// $1 index, $2 resource.
pub const SCAN_RESOURCE_VECTORS: &str = "SELECT id, embedding, metadata FROM vectors \
     WHERE index_name = $1 AND resource_id = $2";

pub const DELETE_VECTORS: &str = "DELETE FROM vectors WHERE index_name = $1 AND id = ANY($2)";

// --- queued messages -------------------------------------------------------------------------

/// A taken id inserts nothing and returns no row.
pub const INSERT_QUEUED: &str = "INSERT INTO queued_messages \
     (id, run_id, agent_id, thread_id, resource_id, message, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING seq";

pub const LIST_QUEUED: &str = "SELECT id, run_id, agent_id, thread_id, resource_id, message, seq, \
     created_at FROM queued_messages WHERE thread_id = $1 ORDER BY seq";

pub const DELETE_QUEUED: &str = "DELETE FROM queued_messages WHERE id = $1";

/// Each thread with a queue, with the agent of its oldest message, oldest queue first.
pub const QUEUED_THREADS: &str = "SELECT agent_id, thread_id, resource_id FROM \
     (SELECT DISTINCT ON (thread_id) agent_id, thread_id, resource_id, seq \
      FROM queued_messages ORDER BY thread_id, seq) firsts ORDER BY seq";
