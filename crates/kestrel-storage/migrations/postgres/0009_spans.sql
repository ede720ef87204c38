-- Spans of traces, one row per span (Mastra's `mastra_ai_spans` columns), upserted by
-- (trace_id, span_id). Times are Unix nanoseconds (at most 2^63 - 1). The JSON columns are
-- `json`, not `jsonb`: kept as written (exact round trip, `\u0000` in strings accepted);
-- `input`, `output` and `error` are NULL when the span has none. Ids compare bytewise
-- (`COLLATE "C"`), as the other backends order them.
CREATE TABLE spans (
    trace_id       TEXT COLLATE "C" NOT NULL,
    span_id        TEXT COLLATE "C" NOT NULL,
    parent_span_id TEXT COLLATE "C",
    name           TEXT NOT NULL,
    span_type      TEXT NOT NULL,
    started_at     BIGINT NOT NULL,
    ended_at       BIGINT NOT NULL,
    attributes     JSON NOT NULL,
    input          JSON,
    output         JSON,
    error          JSON,
    entity_type    TEXT,
    entity_id      TEXT,
    entity_name    TEXT,
    run_id         TEXT,
    thread_id      TEXT,
    resource_id    TEXT,
    user_id        TEXT,
    metadata       JSON NOT NULL,
    tags           JSON NOT NULL,
    -- True when the span's parent is not stored (it has none, or it is a caller's, outside
    -- the trace): the trace's root is its earliest top-level span. Kept up to date by every
    -- save (a parent saved after its children clears theirs).
    top_level      BOOLEAN NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);

-- Retention: the traces with a span started before a time.
CREATE INDEX spans_by_start ON spans (started_at, trace_id);
-- Traces that failed, and where.
CREATE INDEX spans_errors ON spans (trace_id) WHERE error IS NOT NULL;

-- The top-level spans (about one a trace): the roots, and the listings' filters on them.
CREATE INDEX spans_top_level ON spans (trace_id, started_at, span_id) WHERE top_level;
CREATE INDEX spans_top_level_by_parent ON spans (trace_id, parent_span_id) WHERE top_level;
CREATE INDEX spans_top_level_by_start ON spans (started_at, trace_id) WHERE top_level;
CREATE INDEX spans_top_level_by_entity ON spans (entity_id, started_at, trace_id) WHERE top_level;
CREATE INDEX spans_top_level_by_run ON spans (run_id, started_at, trace_id) WHERE top_level;
CREATE INDEX spans_top_level_by_thread ON spans (thread_id, started_at, trace_id) WHERE top_level;
CREATE INDEX spans_top_level_by_resource ON spans (resource_id, started_at, trace_id) WHERE top_level;
CREATE INDEX spans_top_level_by_user ON spans (user_id, started_at, trace_id) WHERE top_level;
