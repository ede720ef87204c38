//! The traces of [`PostgresStorage`]: spans upserted in one transaction per save (multi-row
//! inserts of arrays), traces listed (root found, filtered, counted and paged in SQL), read,
//! deleted and pruned.
//!
//! **Concurrency.** A save takes a transaction-scoped advisory lock per trace it writes (in
//! one order, so two saves never wait for each other in a cycle): saves of one trace, from this
//! instance or another, run one after the other, so a parent and its child saved at the same
//! time still see each other (the child is not left top-level). Saves of other traces do not
//! wait.

use std::collections::HashSet;

use async_trait::async_trait;
use kestrel_core::trace::{
    Retention, SpanRecord, SpanStore, SpanStoreError, TracePage, TraceQuery, TraceSummary,
};
use sqlx::{Executor, Postgres, QueryBuilder};

use super::{PostgresStorage, err};
use crate::error::Result;
use crate::spans::{
    AgeCut, EncodedSpan, LISTING_ORDER, SqlBuilder, StoredSpan, kept_traces, limit_offset,
    push_roots, root_select_list, select_list, span_err,
};

/// The advisory lock class of traces being saved (`SPAN` in ASCII), with `hashtext(trace_id)`
/// as the object.
const TRACE_LOCK_CLASS: i32 = 0x5350_414E;

/// Takes the save locks (class $2) of the traces of the text array $1, in the order of their
/// hashes (the sorted subquery's rows come to the lock calls in order).
const LOCK_TRACES: &str = "SELECT pg_advisory_xact_lock($2, h) IS NULL FROM \
     (SELECT DISTINCT hashtext(t) AS h FROM unnest($1::text[]) AS t ORDER BY h) AS locks";

/// Saves spans given as arrays, one per column ($1..$20, in `spans::COLUMNS` order), and
/// whether each one's parent is in the same batch ($21), replacing the stored ones; a span is
/// top-level when its parent is neither stored nor in the batch.
const UPSERT: &str = "INSERT INTO spans (trace_id, span_id, parent_span_id, name, span_type, \
     started_at, ended_at, attributes, input, output, error, entity_type, entity_id, \
     entity_name, run_id, thread_id, resource_id, user_id, metadata, tags, top_level) \
     SELECT b.trace_id, b.span_id, b.parent_span_id, b.name, b.span_type, b.started_at, \
     b.ended_at, b.attributes::json, b.input::json, b.output::json, b.error::json, \
     b.entity_type, b.entity_id, b.entity_name, b.run_id, b.thread_id, b.resource_id, \
     b.user_id, b.metadata::json, b.tags::json, \
     CASE WHEN b.parent_span_id IS NULL THEN TRUE WHEN b.parent_in_batch THEN FALSE \
     ELSE NOT EXISTS (SELECT 1 FROM spans p \
     WHERE p.trace_id = b.trace_id AND p.span_id = b.parent_span_id) END \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], \
     $7::int8[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], \
     $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], \
     $20::text[], $21::bool[]) \
     AS b(trace_id, span_id, parent_span_id, name, span_type, started_at, ended_at, \
     attributes, input, output, error, entity_type, entity_id, entity_name, run_id, thread_id, \
     resource_id, user_id, metadata, tags, parent_in_batch) \
     ON CONFLICT (trace_id, span_id) DO UPDATE SET parent_span_id = excluded.parent_span_id, \
     name = excluded.name, span_type = excluded.span_type, started_at = excluded.started_at, \
     ended_at = excluded.ended_at, attributes = excluded.attributes, input = excluded.input, \
     output = excluded.output, error = excluded.error, entity_type = excluded.entity_type, \
     entity_id = excluded.entity_id, entity_name = excluded.entity_name, \
     run_id = excluded.run_id, thread_id = excluded.thread_id, \
     resource_id = excluded.resource_id, user_id = excluded.user_id, \
     metadata = excluded.metadata, tags = excluded.tags, top_level = excluded.top_level";

/// The stored children of the spans ($1 traces, $2 span ids) are not top-level any more.
const CLEAR_CHILDREN: &str = "UPDATE spans s SET top_level = FALSE \
     FROM unnest($1::text[], $2::text[]) AS b(trace_id, span_id) \
     WHERE s.top_level AND s.trace_id = b.trace_id AND s.parent_span_id = b.span_id";

/// Deletes the traces of the text array $1.
const DELETE_TRACES: &str = "DELETE FROM spans WHERE trace_id = ANY($1::text[])";

/// Deletes the traces with a span started before $1.
const DELETE_STARTED_BEFORE: &str =
    "DELETE FROM spans WHERE trace_id IN (SELECT trace_id FROM spans WHERE started_at < $1)";

const DELETE_ALL: &str = "DELETE FROM spans";

/// Deletes all but the $1 newest traces (by their earliest span's start, then id).
const DELETE_BUT_NEWEST: &str = "DELETE FROM spans WHERE trace_id IN (SELECT trace_id \
     FROM spans GROUP BY trace_id ORDER BY MIN(started_at) DESC, trace_id DESC OFFSET $1)";

/// Spans per insert statement.
const CHUNK: usize = 1000;

impl<'a> SqlBuilder for QueryBuilder<'a, Postgres> {
    const TRUE: &'static str = "TRUE";

    fn sql(&mut self, sql: &str) {
        self.push(sql);
    }

    fn text(&mut self, value: String) {
        self.push_bind(value);
    }

    fn int(&mut self, value: i64) {
        self.push_bind(value);
    }
}

/// A listed trace's root, with what its other spans say.
#[derive(sqlx::FromRow)]
struct ListedRoot {
    #[sqlx(flatten)]
    root: StoredSpan,
    span_count: i64,
    child_error: bool,
}

/// The columns of a chunk of spans, as arrays.
#[derive(Default)]
struct Columns {
    trace_id: Vec<String>,
    span_id: Vec<String>,
    parent_span_id: Vec<Option<String>>,
    name: Vec<String>,
    span_type: Vec<&'static str>,
    started_at: Vec<i64>,
    ended_at: Vec<i64>,
    attributes: Vec<String>,
    input: Vec<Option<String>>,
    output: Vec<Option<String>>,
    error: Vec<Option<String>>,
    entity_type: Vec<Option<String>>,
    entity_id: Vec<Option<String>>,
    entity_name: Vec<Option<String>>,
    run_id: Vec<Option<String>>,
    thread_id: Vec<Option<String>>,
    resource_id: Vec<Option<String>>,
    user_id: Vec<Option<String>>,
    metadata: Vec<String>,
    tags: Vec<String>,
    parent_in_batch: Vec<bool>,
}

impl Columns {
    fn of(spans: Vec<EncodedSpan>, batch: &HashSet<(String, String)>) -> Self {
        let mut c = Self::default();
        for s in spans {
            c.parent_in_batch.push(
                s.parent_span_id
                    .as_ref()
                    .is_some_and(|p| batch.contains(&(s.trace_id.clone(), p.clone()))),
            );
            c.trace_id.push(s.trace_id);
            c.span_id.push(s.span_id);
            c.parent_span_id.push(s.parent_span_id);
            c.name.push(s.name);
            c.span_type.push(s.span_type);
            c.started_at.push(s.started_at);
            c.ended_at.push(s.ended_at);
            c.attributes.push(s.attributes);
            c.input.push(s.input);
            c.output.push(s.output);
            c.error.push(s.error);
            c.entity_type.push(s.entity_type);
            c.entity_id.push(s.entity_id);
            c.entity_name.push(s.entity_name);
            c.run_id.push(s.run_id);
            c.thread_id.push(s.thread_id);
            c.resource_id.push(s.resource_id);
            c.user_id.push(s.user_id);
            c.metadata.push(s.metadata);
            c.tags.push(s.tags);
        }
        c
    }

    async fn save(self, conn: &mut sqlx::PgConnection) -> Result<()> {
        const OP: &str = "save_spans";
        sqlx::query(UPSERT)
            .bind(&self.trace_id)
            .bind(&self.span_id)
            .bind(self.parent_span_id)
            .bind(self.name)
            .bind(self.span_type)
            .bind(self.started_at)
            .bind(self.ended_at)
            .bind(self.attributes)
            .bind(self.input)
            .bind(self.output)
            .bind(self.error)
            .bind(self.entity_type)
            .bind(self.entity_id)
            .bind(self.entity_name)
            .bind(self.run_id)
            .bind(self.thread_id)
            .bind(self.resource_id)
            .bind(self.user_id)
            .bind(self.metadata)
            .bind(self.tags)
            .bind(self.parent_in_batch)
            .execute(&mut *conn)
            .await
            .map_err(err(OP))?;
        // The children saved before their parent (they usually end, and are saved, first).
        sqlx::query(CLEAR_CHILDREN)
            .bind(self.trace_id)
            .bind(self.span_id)
            .execute(&mut *conn)
            .await
            .map_err(err(OP))?;
        Ok(())
    }
}

impl PostgresStorage {
    async fn save_spans(&self, spans: &[SpanRecord]) -> Result<()> {
        const OP: &str = "save_spans";
        let batch = EncodedSpan::batch(spans)?;
        if batch.is_empty() {
            return Ok(());
        }
        let keys: HashSet<(String, String)> = batch
            .iter()
            .map(|s| (s.trace_id.clone(), s.span_id.clone()))
            .collect();
        let traces: Vec<&str> = batch.iter().map(|s| s.trace_id.as_str()).collect();
        let mut tx = self.begin(OP).await?;
        let _locked: Vec<bool> = sqlx::query_scalar(LOCK_TRACES)
            .bind(&traces)
            .bind(TRACE_LOCK_CLASS)
            .fetch_all(&mut *tx)
            .await
            .map_err(err(OP))?;
        let mut rest = batch;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(CHUNK));
            Columns::of(rest, &keys).save(&mut tx).await?;
            rest = tail;
        }
        tx.commit().await.map_err(err(OP))
    }

    async fn list_roots(&self, query: &TraceQuery) -> Result<TracePage> {
        const OP: &str = "list_traces";
        let mut count = QueryBuilder::<Postgres>::new("SELECT COUNT(*)");
        push_roots(&mut count, query);
        let mut select =
            QueryBuilder::<Postgres>::new(format!("SELECT {}", root_select_list("{}::text")));
        push_roots(&mut select, query);
        let (limit, offset) = limit_offset(query);
        select
            .push(LISTING_ORDER)
            .push(" LIMIT ")
            .push_bind(limit)
            .push(" OFFSET ")
            .push_bind(offset);
        // One snapshot for the count and the page, so they agree.
        let mut tx = self.begin(OP).await?;
        tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(err(OP))?;
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&mut *tx)
            .await
            .map_err(err(OP))?;
        let rows: Vec<ListedRoot> = select
            .build_query_as()
            .fetch_all(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        let traces = rows
            .into_iter()
            .map(|row| {
                let count = usize::try_from(row.span_count).unwrap_or(0);
                Ok(TraceSummary::new(
                    row.root.into_record()?,
                    row.child_error,
                    count,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(TracePage::new(traces, usize::try_from(total).unwrap_or(0)))
    }

    async fn read_trace(&self, trace_id: &str) -> Result<Vec<SpanRecord>> {
        const OP: &str = "trace";
        let statement = format!(
            "SELECT {} FROM spans s WHERE s.trace_id = $1 ORDER BY s.started_at, s.span_id",
            select_list("s", "{}::text")
        );
        let rows: Vec<StoredSpan> = sqlx::query_as(&statement)
            .bind(trace_id)
            .fetch_all(&self.pool)
            .await
            .map_err(err(OP))?;
        rows.into_iter().map(StoredSpan::into_record).collect()
    }

    async fn delete_spans_of(&self, trace_ids: &[String]) -> Result<u64> {
        const OP: &str = "delete_traces";
        if trace_ids.is_empty() {
            return Ok(0);
        }
        let done = sqlx::query(DELETE_TRACES)
            .bind(trace_ids)
            .execute(&self.pool)
            .await
            .map_err(err(OP))?;
        Ok(done.rows_affected())
    }

    async fn prune_spans(&self, retention: Retention, now: u64) -> Result<u64> {
        const OP: &str = "prune_spans";
        let cut = AgeCut::new(retention.max_age_ns, now);
        let kept = kept_traces(retention.max_traces);
        if matches!(cut, AgeCut::Nothing) && kept.is_none() {
            return Ok(0);
        }
        let mut tx = self.begin(OP).await?;
        let mut deleted = match cut {
            AgeCut::Nothing => 0,
            AgeCut::Before(at) => sqlx::query(DELETE_STARTED_BEFORE)
                .bind(at)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?
                .rows_affected(),
            AgeCut::Everything => sqlx::query(DELETE_ALL)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?
                .rows_affected(),
        };
        if let Some(kept) = kept {
            deleted += sqlx::query(DELETE_BUT_NEWEST)
                .bind(kept)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?
                .rows_affected();
        }
        tx.commit().await.map_err(err(OP))?;
        Ok(deleted)
    }
}

#[async_trait]
impl SpanStore for PostgresStorage {
    async fn save(&self, spans: &[SpanRecord]) -> Result<(), SpanStoreError> {
        self.bounded("save_spans", self.save_spans(spans))
            .await
            .map_err(span_err)
    }

    async fn list_traces(&self, query: &TraceQuery) -> Result<TracePage, SpanStoreError> {
        self.bounded("list_traces", self.list_roots(query))
            .await
            .map_err(span_err)
    }

    async fn trace(&self, trace_id: &str) -> Result<Vec<SpanRecord>, SpanStoreError> {
        self.bounded("trace", self.read_trace(trace_id))
            .await
            .map_err(span_err)
    }

    async fn delete_traces(&self, trace_ids: &[String]) -> Result<u64, SpanStoreError> {
        self.bounded("delete_traces", self.delete_spans_of(trace_ids))
            .await
            .map_err(span_err)
    }

    async fn prune(&self, retention: Retention, now: u64) -> Result<u64, SpanStoreError> {
        self.bounded("prune_spans", self.prune_spans(retention, now))
            .await
            .map_err(span_err)
    }
}
