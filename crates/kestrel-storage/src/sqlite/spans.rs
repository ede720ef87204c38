//! The traces of [`SqliteStorage`]: spans upserted in one write transaction per save, traces
//! listed (root found, filtered, counted and paged in SQL), read, deleted and pruned.

use async_trait::async_trait;
use kestrel_core::trace::{
    Retention, SpanRecord, SpanStore, SpanStoreError, TracePage, TraceQuery, TraceSummary,
};
use rusqlite::{Connection, params};

use super::conn::Cost;
use super::{SHORT_BATCH, SqliteStorage, begin, err, json_ids, query_dynamic, sql};
use crate::error::Result;
use crate::spans::{
    AgeCut, EncodedSpan, LISTING_ORDER, SqlBuilder, StoredSpan, kept_traces, limit_offset,
    push_roots, root_select_list, select_list, span_err,
};

/// Saves one span (?1..?20 its columns, in `spans::COLUMNS` order), replacing the stored one;
/// it is top-level when its parent is not stored.
const UPSERT: &str = "INSERT INTO spans (trace_id, span_id, parent_span_id, name, span_type, \
     started_at, ended_at, attributes, input, output, error, entity_type, entity_id, \
     entity_name, run_id, thread_id, resource_id, user_id, metadata, tags, top_level) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
     ?19, ?20, ?3 IS NULL OR NOT EXISTS \
     (SELECT 1 FROM spans p WHERE p.trace_id = ?1 AND p.span_id = ?3)) \
     ON CONFLICT (trace_id, span_id) DO UPDATE SET parent_span_id = excluded.parent_span_id, \
     name = excluded.name, span_type = excluded.span_type, started_at = excluded.started_at, \
     ended_at = excluded.ended_at, attributes = excluded.attributes, input = excluded.input, \
     output = excluded.output, error = excluded.error, entity_type = excluded.entity_type, \
     entity_id = excluded.entity_id, entity_name = excluded.entity_name, \
     run_id = excluded.run_id, thread_id = excluded.thread_id, \
     resource_id = excluded.resource_id, user_id = excluded.user_id, \
     metadata = excluded.metadata, tags = excluded.tags, top_level = excluded.top_level";

/// The children of span ?2 of trace ?1 are not top-level (their parent is stored now).
const CLEAR_CHILDREN: &str = "UPDATE spans SET top_level = 0 \
     WHERE trace_id = ?1 AND parent_span_id = ?2 AND top_level = 1";

/// Deletes the traces of the JSON array ?1.
const DELETE_TRACES: &str = "DELETE FROM spans WHERE trace_id IN (SELECT value FROM json_each(?1))";

/// Deletes the traces with a span started before ?1.
const DELETE_STARTED_BEFORE: &str =
    "DELETE FROM spans WHERE trace_id IN (SELECT trace_id FROM spans WHERE started_at < ?1)";

const DELETE_ALL: &str = "DELETE FROM spans";

/// Deletes all but the ?1 newest traces (by their earliest span's start, then id).
const DELETE_BUT_NEWEST: &str = "DELETE FROM spans WHERE trace_id IN (SELECT trace_id \
     FROM spans GROUP BY trace_id ORDER BY MIN(started_at) DESC, trace_id DESC \
     LIMIT -1 OFFSET ?1)";

impl SqlBuilder for sql::Dynamic {
    const TRUE: &'static str = "1";

    fn sql(&mut self, sql: &str) {
        self.push(sql);
    }

    fn text(&mut self, value: String) {
        self.bind(value);
    }

    fn int(&mut self, value: i64) {
        self.bind(value);
    }
}

/// Reads the columns of `spans::select_list`.
fn stored_span(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredSpan> {
    Ok(StoredSpan {
        trace_id: row.get(0)?,
        span_id: row.get(1)?,
        parent_span_id: row.get(2)?,
        name: row.get(3)?,
        span_type: row.get(4)?,
        started_at: row.get(5)?,
        ended_at: row.get(6)?,
        attributes: row.get(7)?,
        input: row.get(8)?,
        output: row.get(9)?,
        error: row.get(10)?,
        entity_type: row.get(11)?,
        entity_id: row.get(12)?,
        entity_name: row.get(13)?,
        run_id: row.get(14)?,
        thread_id: row.get(15)?,
        resource_id: row.get(16)?,
        user_id: row.get(17)?,
        metadata: row.get(18)?,
        tags: row.get(19)?,
    })
}

/// Saves `spans` on `conn` (in the caller's transaction).
fn save_all(conn: &Connection, spans: &[EncodedSpan]) -> Result<()> {
    const OP: &str = "save_spans";
    let mut upsert = conn.prepare_cached(UPSERT).map_err(err(OP))?;
    let mut clear = conn.prepare_cached(CLEAR_CHILDREN).map_err(err(OP))?;
    for s in spans {
        upsert
            .execute(params![
                s.trace_id,
                s.span_id,
                s.parent_span_id,
                s.name,
                s.span_type,
                s.started_at,
                s.ended_at,
                s.attributes,
                s.input,
                s.output,
                s.error,
                s.entity_type,
                s.entity_id,
                s.entity_name,
                s.run_id,
                s.thread_id,
                s.resource_id,
                s.user_id,
                s.metadata,
                s.tags,
            ])
            .map_err(err(OP))?;
        // Its children saved before it (they usually end, and are saved, first).
        clear
            .execute(params![s.trace_id, s.span_id])
            .map_err(err(OP))?;
    }
    Ok(())
}

#[async_trait]
impl SpanStore for SqliteStorage {
    async fn save(&self, spans: &[SpanRecord]) -> Result<(), SpanStoreError> {
        const OP: &str = "save_spans";
        let batch = std::sync::Arc::new(EncodedSpan::batch(spans).map_err(span_err)?);
        if batch.is_empty() {
            return Ok(());
        }
        let cost = if batch.len() > SHORT_BATCH {
            Cost::Long
        } else {
            Cost::Short
        };
        self.conns
            .write(OP, cost, move |conn| {
                let tx = begin(conn, OP)?;
                save_all(&tx, &batch)?;
                tx.commit().map_err(err(OP))
            })
            .await
            .map_err(span_err)
    }

    async fn list_traces(&self, query: &TraceQuery) -> Result<TracePage, SpanStoreError> {
        const OP: &str = "list_traces";
        let mut count = sql::Dynamic::new("SELECT COUNT(*)");
        push_roots(&mut count, query);
        let mut select = sql::Dynamic::new(&format!("SELECT {}", root_select_list("{}")));
        push_roots(&mut select, query);
        let (limit, offset) = limit_offset(query);
        select
            .push(LISTING_ORDER)
            .push(" LIMIT ")
            .bind(limit)
            .push(" OFFSET ")
            .bind(offset);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let total = query_dynamic(&tx, &count, |r| r.get::<_, i64>(0), OP)?;
                let rows = query_dynamic(
                    &tx,
                    &select,
                    |r| Ok((stored_span(r)?, r.get::<_, i64>(20)?, r.get::<_, bool>(21)?)),
                    OP,
                )?;
                tx.finish().map_err(err(OP))?;
                Ok((total.into_iter().next().unwrap_or(0), rows))
            })
            .await
            .map_err(span_err)?;
        let traces = rows
            .into_iter()
            .map(|(root, count, child_error)| {
                let root = root.into_record()?;
                let count = usize::try_from(count).unwrap_or(0);
                Ok(TraceSummary::new(root, child_error, count))
            })
            .collect::<Result<Vec<_>>>()
            .map_err(span_err)?;
        Ok(TracePage::new(traces, usize::try_from(total).unwrap_or(0)))
    }

    async fn trace(&self, trace_id: &str) -> Result<Vec<SpanRecord>, SpanStoreError> {
        const OP: &str = "trace";
        let statement = format!(
            "SELECT {} FROM spans s WHERE s.trace_id = ?1 ORDER BY s.started_at, s.span_id",
            select_list("s", "{}")
        );
        let trace_id = trace_id.to_owned();
        let rows: Vec<StoredSpan> = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                conn.prepare_cached(&statement)
                    .and_then(|mut s| s.query_map([&trace_id], stored_span)?.collect())
                    .map_err(err(OP))
            })
            .await
            .map_err(span_err)?;
        rows.into_iter()
            .map(StoredSpan::into_record)
            .collect::<Result<Vec<_>>>()
            .map_err(span_err)
    }

    async fn delete_traces(&self, trace_ids: &[String]) -> Result<u64, SpanStoreError> {
        const OP: &str = "delete_traces";
        if trace_ids.is_empty() {
            return Ok(0);
        }
        let ids = json_ids(trace_ids);
        let cost = if trace_ids.len() > SHORT_BATCH {
            Cost::Long
        } else {
            Cost::Short
        };
        let deleted = self
            .conns
            .write(OP, cost, move |conn| {
                conn.prepare_cached(DELETE_TRACES)
                    .and_then(|mut s| s.execute([&ids]))
                    .map_err(err(OP))
            })
            .await
            .map_err(span_err)?;
        Ok(deleted as u64)
    }

    async fn prune(&self, retention: Retention, now: u64) -> Result<u64, SpanStoreError> {
        const OP: &str = "prune_spans";
        let cut = AgeCut::new(retention.max_age_ns, now);
        let kept = kept_traces(retention.max_traces);
        if matches!(cut, AgeCut::Nothing) && kept.is_none() {
            return Ok(0);
        }
        let deleted = self
            .conns
            .write(OP, Cost::Long, move |conn| {
                let tx = begin(conn, OP)?;
                let mut deleted = match cut {
                    AgeCut::Nothing => Ok(0),
                    AgeCut::Before(at) => tx.execute(DELETE_STARTED_BEFORE, [at]),
                    AgeCut::Everything => tx.execute(DELETE_ALL, []),
                }
                .map_err(err(OP))?;
                if let Some(kept) = kept {
                    deleted += tx.execute(DELETE_BUT_NEWEST, [kept]).map_err(err(OP))?;
                }
                tx.commit().map_err(err(OP))?;
                Ok(deleted)
            })
            .await
            .map_err(span_err)?;
        Ok(deleted as u64)
    }
}
