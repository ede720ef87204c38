//! The checks of traces (core's `SpanStore` on a storage): exact round trips, upserts,
//! listings (root, filters, status, counts, paging), joined traces (deletes, retention and
//! concurrent saves are in `span_retention`). `InMemorySpanStore` is the reference: every
//! backend answers as it does.

use std::sync::Arc;

use kestrel_core::trace::{
    SpanError, SpanRecord, SpanStore, SpanStoreError, SpanType, TraceQuery, TraceStatus,
};
use serde_json::{Value, json};

use super::helpers::meta;
use crate::spans::MAX_SPAN_TIME_NS;
use crate::storage::Storage;

/// A span of `trace` (type `generic`, ended 10 ns after it started).
pub fn span(trace: &str, id: &str, parent: Option<&str>, started_at: u64) -> SpanRecord {
    let mut span: SpanRecord = serde_json::from_value(json!({
        "traceId": trace,
        "spanId": id,
        "name": format!("span {id}"),
        "spanType": "generic",
        "startedAt": started_at,
        "endedAt": started_at.saturating_add(10),
    }))
    .unwrap();
    span.parent_span_id = parent.map(str::to_owned);
    span
}

/// `span`, failed.
fn failed(mut span: SpanRecord) -> SpanRecord {
    span.error = Some(SpanError {
        message: "it failed".into(),
        kind: Some("tool".into()),
    });
    span
}

/// A span with every field set: Unicode, nested JSON, an error, tags, the extreme times.
fn full_span(trace: &str, id: &str) -> SpanRecord {
    let mut s = span(trace, id, None, 0);
    s.name = "agent run: 'météo' 天気 🌦️ \u{202e}rtl\u{301}".into();
    s.span_type = SpanType::AgentRun;
    s.ended_at = MAX_SPAN_TIME_NS;
    s.attributes = meta(json!({
        "usage": {"inputTokens": 12, "outputTokens": 3400},
        "nested": {"a": [1, 2.5, -0.125, 1e300, 0.1, 1.0e-7, 123_456.789_012_345_67, null, true,
                         {"deep": ["x", {"y": "z", "ß": []}]}]},
        "big": u64::MAX,
        "negative": i64::MIN,
        "empty": {},
        "list": [],
        "nul in JSON": "a\u{0}b",
        "": "the empty key",
        "ключ": "значение 🦀",
        "escapes": "quote \" backslash \\ tab \t newline \n",
    }));
    s.input = Some(json!([{"role": "user", "content": "Wie ist das Wetter? 😀"}]));
    // A JSON null is an output, not the lack of one.
    s.output = Some(Value::Null);
    s.error = Some(SpanError {
        message: "tool failed: ❌ \"quoted\"".into(),
        kind: Some("tool".into()),
    });
    s.entity_type = Some("agent".into());
    s.entity_id = Some("météo-agent".into());
    s.entity_name = Some("Météo 🌤".into());
    s.run_id = Some("run-ü".into());
    s.thread_id = Some("thread-ü".into());
    s.resource_id = Some("resource-ü".into());
    s.user_id = Some("user-ü".into());
    s.metadata = meta(json!({"tenant": "acme", "n": 3, "flags": [true, false], "f": 0.3}));
    s.tags = vec!["prod".into(), "ünïcode ✓".into(), String::new()];
    s
}

/// Saves through the span store (`save` alone names several of a storage's traits).
pub(super) async fn save(
    store: &Arc<dyn Storage>,
    spans: &[SpanRecord],
) -> Result<(), SpanStoreError> {
    SpanStore::save(store.as_ref(), spans).await
}

pub(super) fn query() -> TraceQuery {
    TraceQuery::default()
}

/// The trace ids a listing gives, in order.
pub(super) async fn listed(store: &Arc<dyn Storage>, query: &TraceQuery) -> Vec<String> {
    store
        .list_traces(query)
        .await
        .unwrap()
        .traces
        .into_iter()
        .map(|t| t.root.trace_id)
        .collect()
}

/// Spans saved are read back equal, every field (the extreme times, Unicode, nested JSON, a
/// JSON null output); a time past the largest storable refuses the whole batch; NUL is dropped
/// from plain text fields on every backend.
pub async fn spans_round_trip_exact(store: Arc<dyn Storage>) {
    let root = full_span("trace-ü-🦀", "root");
    let mut child = full_span("trace-ü-🦀", "child");
    child.parent_span_id = Some("root".into());
    child.started_at = MAX_SPAN_TIME_NS;
    child.ended_at = MAX_SPAN_TIME_NS;
    child.span_type = SpanType::ToolCall;
    child.input = None;
    child.output = Some(json!({"temperature": 21.5}));
    child.error = Some(SpanError {
        message: String::new(),
        kind: None,
    });
    child.attributes = serde_json::Map::new();
    child.metadata = serde_json::Map::new();
    child.tags = Vec::new();
    child.entity_type = None;
    child.entity_id = None;
    child.entity_name = None;
    child.run_id = None;
    child.thread_id = None;
    child.resource_id = None;
    child.user_id = None;
    save(&store, &[child.clone(), root.clone()]).await.unwrap();

    let read = store.trace("trace-ü-🦀").await.unwrap();
    assert_eq!(
        read,
        vec![root.clone(), child.clone()],
        "read back by start"
    );
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(
        page.traces[0].root, root,
        "the listed root is the saved span"
    );
    assert_eq!(page.traces[0].span_count, 2);
    assert!(page.traces[0].has_child_error);
    assert_eq!(page.traces[0].status, TraceStatus::Error);

    // Past the largest storable time: refused, and nothing of the batch is written.
    let fine = span("too-late", "a", None, 5);
    let late = span("too-late", "b", Some("a"), MAX_SPAN_TIME_NS + 1);
    assert!(save(&store, &[fine.clone(), late]).await.is_err());
    let mut late_end = span("too-late", "c", None, 5);
    late_end.ended_at = u64::MAX;
    assert!(save(&store, &[fine, late_end]).await.is_err());
    assert!(store.trace("too-late").await.unwrap().is_empty());

    // NUL: dropped from the plain text fields (PostgreSQL text cannot hold it), kept in JSON.
    let mut nul = span("nul\0trace", "nul\0span", None, 7);
    nul.name = "a\0b".into();
    nul.entity_id = Some("agent\0x".into());
    nul.attributes = meta(json!({"k": "v\u{0}w"}));
    save(&store, std::slice::from_ref(&nul)).await.unwrap();
    let read = store.trace("nultrace").await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].span_id, "nulspan");
    assert_eq!(read[0].name, "ab");
    assert_eq!(read[0].entity_id.as_deref(), Some("agentx"));
    assert_eq!(read[0].attributes, nul.attributes);
    let empty: &[SpanRecord] = &[];
    save(&store, empty).await.unwrap();
}

/// A span saved again replaces the first (every field, its parent included); a span given twice
/// in one batch is kept once, the last.
pub async fn spans_upsert_replaces(store: Arc<dyn Storage>) {
    let root = span("t", "root", None, 100);
    let child = span("t", "child", Some("root"), 110);
    save(&store, &[root.clone(), child.clone()]).await.unwrap();
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!(page.traces[0].status, TraceStatus::Success);

    let mut again = full_span("t", "child");
    again.parent_span_id = Some("root".into());
    again.started_at = 120;
    again.ended_at = 130;
    save(&store, std::slice::from_ref(&again)).await.unwrap();
    assert_eq!(store.trace("t").await.unwrap(), vec![root.clone(), again]);
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!((page.total, page.traces[0].span_count), (1, 2));
    assert_eq!(page.traces[0].status, TraceStatus::Error);
    assert!(page.traces[0].has_child_error);

    // Replaced by a plain one: the error, the JSON and the scope go.
    save(&store, std::slice::from_ref(&child)).await.unwrap();
    assert_eq!(store.trace("t").await.unwrap(), vec![root.clone(), child]);
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!(page.traces[0].status, TraceStatus::Success);

    // Twice in one batch: the last wins.
    let first = span("t", "twice", Some("root"), 150);
    let mut last = first.clone();
    last.name = "the last".into();
    last.started_at = 140;
    save(&store, &[first, last.clone()]).await.unwrap();
    let read = store.trace("t").await.unwrap();
    assert_eq!(read.len(), 3);
    assert_eq!(read[2], last);

    // A span whose parent changes: saved again under a parent that is not stored, earlier
    // than the root, it becomes the trace's root.
    let mut moved = last.clone();
    moved.parent_span_id = Some("elsewhere".into());
    moved.started_at = 50;
    save(&store, std::slice::from_ref(&moved)).await.unwrap();
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!(page.traces[0].root, moved);
    assert_eq!(page.traces[0].span_count, 3);
    // And back under the root: the root is the root again.
    save(&store, &[last]).await.unwrap();
    assert_eq!(
        store.list_traces(&query()).await.unwrap().traces[0].root,
        root
    );
}

/// Four traces with roots of every kind, and children that do not match the filters.
async fn seed_listing(store: &Arc<dyn Storage>) {
    let scoped = |mut s: SpanRecord, entity: &str, n: &str| {
        s.span_type = SpanType::AgentRun;
        s.entity_type = Some("agent".into());
        s.entity_id = Some(entity.into());
        s.run_id = Some(format!("run-{n}"));
        s.thread_id = Some(format!("thread-{n}"));
        s.resource_id = Some(format!("resource-{n}"));
        s.user_id = Some(format!("user-{n}"));
        s.entity_name = Some(format!("Agent {n}"));
        s
    };
    let mut workflow = span("t4", "w", None, 400);
    workflow.span_type = SpanType::WorkflowRun;
    workflow.entity_type = Some("workflow".into());
    workflow.entity_id = Some("weather".into());
    // A child that would match every agent filter: filters look at the root only.
    let decoy = scoped(span("t4", "w-child", Some("w"), 410), "mail", "1");
    save(
        store,
        &[
            scoped(span("t1", "a", None, 100), "weather", "1"),
            span("t1", "a-tool", Some("a"), 110),
            scoped(span("t2", "b", None, 200), "mail", "2"),
            failed(span("t2", "b-tool", Some("b"), 210)),
            span("t2", "b-model", Some("b"), 220),
            failed(scoped(span("t3", "c", None, 300), "weather", "3")),
            workflow,
            decoy,
        ],
    )
    .await
    .unwrap();
    // Same root start as t3: the greater trace id comes first.
    save(store, &[scoped(span("t0", "d", None, 300), "weather", "4")])
        .await
        .unwrap();
}

/// Traces are listed newest root first (ties: trace id descending), filtered on the root
/// (every filter, the times' bounds), by status, with their span count and whether a span below
/// the root failed, paged, with the total of all pages.
pub async fn spans_list_order_filters_and_paging(store: Arc<dyn Storage>) {
    assert_eq!(store.list_traces(&query()).await.unwrap().total, 0);
    seed_listing(&store).await;
    let all = store.list_traces(&query()).await.unwrap();
    assert_eq!(all.total, 5);
    let ids: Vec<&str> = all
        .traces
        .iter()
        .map(|t| t.root.trace_id.as_str())
        .collect();
    assert_eq!(ids, ["t4", "t3", "t0", "t2", "t1"]);
    let summary = |id: &str| all.traces.iter().find(|t| t.root.trace_id == id).unwrap();
    assert_eq!(summary("t1").root.span_id, "a");
    assert_eq!(summary("t1").span_count, 2);
    assert_eq!(summary("t2").span_count, 3);
    assert_eq!(summary("t4").span_count, 2);
    // A failed child: error, child error. A failed root alone: error, no child error.
    assert_eq!(
        (summary("t2").status, summary("t2").has_child_error),
        (TraceStatus::Error, true)
    );
    assert_eq!(
        (summary("t3").status, summary("t3").has_child_error),
        (TraceStatus::Error, false)
    );
    assert_eq!(
        (summary("t1").status, summary("t1").has_child_error),
        (TraceStatus::Success, false)
    );

    let cases: Vec<(TraceQuery, Vec<&str>)> = vec![
        (
            TraceQuery {
                span_type: Some(SpanType::WorkflowRun),
                ..query()
            },
            vec!["t4"],
        ),
        (
            TraceQuery {
                span_type: Some(SpanType::ToolCall),
                ..query()
            },
            vec![],
        ),
        (
            TraceQuery {
                entity_type: Some("agent".into()),
                ..query()
            },
            vec!["t3", "t0", "t2", "t1"],
        ),
        (
            TraceQuery {
                entity_id: Some("weather".into()),
                ..query()
            },
            vec!["t4", "t3", "t0", "t1"],
        ),
        (
            TraceQuery {
                entity_type: Some("agent".into()),
                entity_id: Some("weather".into()),
                ..query()
            },
            vec!["t3", "t0", "t1"],
        ),
        (
            TraceQuery {
                entity_id: Some("mail".into()),
                ..query()
            },
            vec!["t2"],
        ),
        (
            TraceQuery {
                run_id: Some("run-1".into()),
                ..query()
            },
            vec!["t1"],
        ),
        (
            TraceQuery {
                thread_id: Some("thread-3".into()),
                ..query()
            },
            vec!["t3"],
        ),
        (
            TraceQuery {
                resource_id: Some("resource-2".into()),
                ..query()
            },
            vec!["t2"],
        ),
        (
            TraceQuery {
                user_id: Some("user-4".into()),
                ..query()
            },
            vec!["t0"],
        ),
        (
            TraceQuery {
                user_id: Some("nobody".into()),
                ..query()
            },
            vec![],
        ),
        (
            TraceQuery {
                entity_name: Some("Agent 2".into()),
                ..query()
            },
            vec!["t2"],
        ),
        // The root's name (a child's does not count).
        (
            TraceQuery {
                name: Some("span w".into()),
                ..query()
            },
            vec!["t4"],
        ),
        (
            TraceQuery {
                name: Some("span w-child".into()),
                ..query()
            },
            vec![],
        ),
        (
            TraceQuery {
                started_after: Some(300),
                ..query()
            },
            vec!["t4", "t3", "t0"],
        ),
        (
            TraceQuery {
                started_before: Some(300),
                ..query()
            },
            vec!["t2", "t1"],
        ),
        (
            TraceQuery {
                started_after: Some(200),
                started_before: Some(400),
                ..query()
            },
            vec!["t3", "t0", "t2"],
        ),
        (
            TraceQuery {
                started_after: Some(u64::MAX),
                ..query()
            },
            vec![],
        ),
        (
            TraceQuery {
                started_before: Some(u64::MAX),
                started_after: Some(0),
                ..query()
            },
            vec!["t4", "t3", "t0", "t2", "t1"],
        ),
        (
            TraceQuery {
                status: Some(TraceStatus::Error),
                ..query()
            },
            vec!["t3", "t2"],
        ),
        (
            TraceQuery {
                status: Some(TraceStatus::Success),
                ..query()
            },
            vec!["t4", "t0", "t1"],
        ),
        (
            TraceQuery {
                status: Some(TraceStatus::Error),
                entity_id: Some("weather".into()),
                ..query()
            },
            vec!["t3"],
        ),
    ];
    for (filter, want) in cases {
        let page = store.list_traces(&filter).await.unwrap();
        let got: Vec<&str> = page
            .traces
            .iter()
            .map(|t| t.root.trace_id.as_str())
            .collect();
        assert_eq!(got, want, "{filter:?}");
        assert_eq!(page.total, want.len(), "{filter:?}");
    }

    // Pages: the total is every page's.
    let page = |page, per_page| TraceQuery {
        page,
        per_page,
        ..query()
    };
    for (p, want) in [
        (0, vec!["t4", "t3"]),
        (1, vec!["t0", "t2"]),
        (2, vec!["t1"]),
        (3, vec![]),
    ] {
        let got = store.list_traces(&page(p, 2)).await.unwrap();
        assert_eq!(got.total, 5);
        let ids: Vec<&str> = got
            .traces
            .iter()
            .map(|t| t.root.trace_id.as_str())
            .collect();
        assert_eq!(ids, want, "page {p}");
    }
    let filtered = TraceQuery {
        per_page: 1,
        page: 1,
        status: Some(TraceStatus::Success),
        ..query()
    };
    assert_eq!(listed(&store, &filtered).await, ["t0"]);
    assert_eq!(store.list_traces(&filtered).await.unwrap().total, 3);
    assert!(
        store
            .list_traces(&page(u32::MAX, 100))
            .await
            .unwrap()
            .traces
            .is_empty()
    );
}

/// Pages are at most `MAX_TRACES_PAGE` (100) traces, `DEFAULT_TRACES_PAGE` (20) by default.
pub async fn spans_list_page_sizes(store: Arc<dyn Storage>) {
    let spans: Vec<SpanRecord> = (0..130u64)
        .map(|i| span(&format!("t{i:03}"), "root", None, 1_000 + i))
        .collect();
    save(&store, &spans).await.unwrap();
    let sized = |per_page| TraceQuery {
        per_page,
        ..query()
    };
    let default = store.list_traces(&sized(0)).await.unwrap();
    assert_eq!((default.traces.len(), default.total), (20, 130));
    assert_eq!(default.traces[0].root.trace_id, "t129");
    assert_eq!(
        store.list_traces(&sized(500)).await.unwrap().traces.len(),
        100
    );
    let last = TraceQuery {
        page: 1,
        per_page: 100,
        ..query()
    };
    let last = listed(&store, &last).await;
    assert_eq!(last.len(), 30);
    assert_eq!(last[29], "t000");
}

/// The root is the earliest span whose parent is not stored: a trace joined from a caller (its
/// root's parent elsewhere) is listed with that root; children saved before their parent are
/// not roots once it comes; of two top-level spans, the earlier (then the smaller id) is.
pub async fn spans_joined_trace_root(store: Arc<dyn Storage>) {
    // Joined: the caller's span is not stored. Saved children first, as a tracer does.
    let child = span("joined", "child", Some("local"), 20);
    let grandchild = span("joined", "grandchild", Some("child"), 30);
    save(&store, std::slice::from_ref(&grandchild))
        .await
        .unwrap();
    assert_eq!(
        store.list_traces(&query()).await.unwrap().traces[0].root,
        grandchild
    );
    save(&store, std::slice::from_ref(&child)).await.unwrap();
    assert_eq!(
        store.list_traces(&query()).await.unwrap().traces[0].root,
        child
    );
    let mut local = span("joined", "local", Some("callers-span"), 10);
    local.span_type = SpanType::AgentRun;
    save(&store, std::slice::from_ref(&local)).await.unwrap();
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.traces[0].root, local);
    assert_eq!(page.traces[0].span_count, 3);
    let agents = TraceQuery {
        span_type: Some(SpanType::AgentRun),
        ..query()
    };
    assert_eq!(listed(&store, &agents).await, ["joined"]);

    // A child that started before its parent (clocks): once the parent is stored, the
    // parent is the root, however early the child.
    let early_child = span("skew", "early", Some("late-root"), 1);
    save(&store, &[early_child]).await.unwrap();
    let late_root = span("skew", "late-root", None, 5);
    save(&store, std::slice::from_ref(&late_root))
        .await
        .unwrap();
    let skew = TraceQuery {
        started_before: Some(8),
        ..query()
    };
    let page = store.list_traces(&skew).await.unwrap();
    assert_eq!(page.traces.len(), 1);
    assert_eq!(page.traces[0].root, late_root);

    // Two top-level spans at the same instant: the smaller span id; a span that is its own
    // parent is not top-level.
    save(
        &store,
        &[
            span("twins", "b", None, 1_000),
            span("twins", "a", Some("gone"), 1_000),
            span("twins", "0-self", Some("0-self"), 999),
        ],
    )
    .await
    .unwrap();
    let twins = TraceQuery {
        started_after: Some(999),
        ..query()
    };
    let page = store.list_traces(&twins).await.unwrap();
    assert_eq!(page.traces[0].root.span_id, "a");
    assert_eq!(page.traces[0].span_count, 3);
    // A root-to-be in a later batch than its children, all in one large save, in any order.
    let mut big: Vec<SpanRecord> = (0..2_500u32)
        .map(|i| {
            let parent = if i == 0 {
                "big-root".to_owned()
            } else {
                format!("s{:04}", (i - 1) / 2)
            };
            span(
                "big",
                &format!("s{i:04}"),
                Some(&parent),
                10_000 + u64::from(i),
            )
        })
        .collect();
    big.reverse();
    big.push(span("big", "big-root", None, 20_000));
    save(&store, &big).await.unwrap();
    let wide = TraceQuery {
        started_after: Some(10_000),
        ..query()
    };
    let page = store.list_traces(&wide).await.unwrap();
    assert_eq!(page.total, 1, "the big trace is listed once");
    assert_eq!(page.traces[0].root.span_id, "big-root");
    assert_eq!(page.traces[0].span_count, 2_501);
    assert_eq!(store.trace("big").await.unwrap().len(), 2_501);
}

/// An unknown trace has no spans; deleting it deletes nothing.
pub async fn spans_unknown_trace_is_empty(store: Arc<dyn Storage>) {
    assert!(store.trace("nope").await.unwrap().is_empty());
    assert_eq!(store.delete_traces(&["nope".into()]).await.unwrap(), 0);
    assert_eq!(store.delete_traces(&[]).await.unwrap(), 0);
    let page = store.list_traces(&query()).await.unwrap();
    assert_eq!((page.total, page.traces.len()), (0, 0));
    save(&store, &[span("known", "a", None, 1)]).await.unwrap();
    assert!(store.trace("kno").await.unwrap().is_empty());
    assert!(store.trace("KNOWN").await.unwrap().is_empty());
}
