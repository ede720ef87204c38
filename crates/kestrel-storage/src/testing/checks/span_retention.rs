//! The checks of traces' deletes, retention (prune by age, by count) and concurrent saves.

use std::sync::Arc;

use kestrel_core::trace::{Retention, SpanRecord, TraceQuery};

use super::spans::{listed, query, save, span};
use crate::storage::Storage;

/// Deleting traces deletes all their spans and counts them (an id given twice, or unknown,
/// counts nothing more); other traces stay.
pub async fn spans_delete_counts(store: Arc<dyn Storage>) {
    save(
        &store,
        &[
            span("a", "1", None, 1),
            span("a", "2", Some("1"), 2),
            span("a", "3", Some("1"), 3),
            span("b", "1", None, 4),
            span("c", "1", None, 5),
            span("c", "2", Some("1"), 6),
        ],
    )
    .await
    .unwrap();
    let ids = ["a", "c", "a", "zzz"].map(String::from);
    assert_eq!(store.delete_traces(&ids).await.unwrap(), 5);
    assert!(store.trace("a").await.unwrap().is_empty());
    assert!(store.trace("c").await.unwrap().is_empty());
    assert_eq!(store.trace("b").await.unwrap().len(), 1);
    assert_eq!(listed(&store, &query()).await, ["b"]);
    assert_eq!(store.delete_traces(&ids).await.unwrap(), 0);
    // Many ids at once.
    let many: Vec<String> = (0..500).map(|i| format!("x{i}")).collect();
    let spans: Vec<SpanRecord> = many.iter().map(|t| span(t, "r", None, 9)).collect();
    save(&store, &spans).await.unwrap();
    assert_eq!(store.delete_traces(&many).await.unwrap(), 500);
    assert_eq!(listed(&store, &query()).await, ["b"]);
}

/// Pruning by age deletes the traces whose earliest span (not their root) started more than
/// `max_age_ns` before `now`, whole.
pub async fn spans_prune_by_age(store: Arc<dyn Storage>) {
    save(
        &store,
        &[
            span("old", "r", None, 100),
            span("old", "c", Some("r"), 500),
            // Joined: its root is recent, a span of it is old.
            span("joined", "r", Some("caller"), 900),
            span("joined", "early", None, 150),
            span("new", "r", None, 800),
        ],
    )
    .await
    .unwrap();
    let aged = |max_age_ns| Retention {
        max_age_ns: Some(max_age_ns),
        max_traces: None,
    };
    // Nothing older than 1000 ns at 1000, nor when `now` is before the age.
    assert_eq!(store.prune(aged(1_000), 1_000).await.unwrap(), 0);
    assert_eq!(store.prune(aged(1_000), 10).await.unwrap(), 0);
    assert_eq!(
        store.prune(Retention::default(), u64::MAX).await.unwrap(),
        0
    );
    // Started exactly `max_age` ago: kept. One ns more: gone.
    assert_eq!(store.prune(aged(900), 1_000).await.unwrap(), 0);
    assert_eq!(store.prune(aged(899), 1_000).await.unwrap(), 2);
    assert!(store.trace("old").await.unwrap().is_empty());
    assert_eq!(store.prune(aged(800), 1_000).await.unwrap(), 2);
    assert_eq!(listed(&store, &query()).await, ["new"]);
    // A cut later than any storable time: everything goes.
    assert_eq!(store.prune(aged(0), u64::MAX).await.unwrap(), 1);
    assert_eq!(store.list_traces(&query()).await.unwrap().total, 0);
}

/// Pruning by count keeps the newest traces (by their earliest span's start, then trace id),
/// after the age rule; it counts the spans deleted.
pub async fn spans_prune_by_count(store: Arc<dyn Storage>) {
    save(
        &store,
        &[
            // Saved first, started last.
            span("d", "r", None, 400),
            span("d", "c", Some("r"), 410),
            span("a", "r", None, 100),
            span("b", "r", None, 200),
            span("b", "c", Some("r"), 210),
            span("b", "g", Some("c"), 220),
            // Its root started last of all, its earliest span second.
            span("c", "r", Some("caller"), 1_000),
            span("c", "e", None, 150),
            // The same earliest start as `d`: the greater id is the newer.
            span("e", "r", None, 400),
        ],
    )
    .await
    .unwrap();
    let keep = |max_traces| Retention {
        max_age_ns: None,
        max_traces: Some(max_traces),
    };
    assert_eq!(store.prune(keep(5), 0).await.unwrap(), 0);
    assert_eq!(store.prune(keep(usize::MAX), 0).await.unwrap(), 0);
    // Oldest first: a (1 span), then c (2).
    assert_eq!(store.prune(keep(3), 0).await.unwrap(), 3);
    assert!(store.trace("a").await.unwrap().is_empty());
    assert!(store.trace("c").await.unwrap().is_empty());
    // Then b (3); of d and e (same start), d.
    assert_eq!(store.prune(keep(1), 0).await.unwrap(), 5);
    assert_eq!(listed(&store, &query()).await, ["e"]);
    // Both rules: age first, then count.
    save(
        &store,
        &[span("f", "r", None, 500), span("g", "r", None, 600)],
    )
    .await
    .unwrap();
    let both = Retention {
        max_age_ns: Some(550),
        max_traces: Some(1),
    };
    // At 1000: e (400) is too old; of f and g, g is kept.
    assert_eq!(store.prune(both, 1_000).await.unwrap(), 2);
    assert_eq!(listed(&store, &query()).await, ["g"]);
    assert_eq!(store.prune(keep(0), 0).await.unwrap(), 1);
    assert_eq!(store.list_traces(&query()).await.unwrap().total, 0);
}

/// Saves from several tasks at once lose no span, and a parent saved at the same time as its
/// children is still their parent (the root is right).
pub async fn spans_concurrent_saves(store: Arc<dyn Storage>) {
    const TASKS: u64 = 8;
    const TRACES: u64 = 12;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            for n in 0..TRACES {
                // Its own trace: a root and a child, in two saves.
                let own = format!("own-{task}-{n}");
                save(&store, &[span(&own, "child", Some("root"), 10 + n)])
                    .await
                    .unwrap();
                save(&store, &[span(&own, "root", None, 5 + n)])
                    .await
                    .unwrap();
                // Shared traces: task 0 saves the root (started after its children), the
                // others each a child, at once.
                let shared = format!("shared-{n}");
                let spans = if task == 0 {
                    vec![span(&shared, "root", None, 1_000 + n)]
                } else {
                    vec![span(
                        &shared,
                        &format!("child-{task}"),
                        Some("root"),
                        500 + n,
                    )]
                };
                save(&store, &spans).await.unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let everything = TraceQuery {
        per_page: 100,
        ..query()
    };
    let mut total = 0;
    let mut page_no = 0;
    loop {
        let page = store
            .list_traces(&TraceQuery {
                page: page_no,
                ..everything.clone()
            })
            .await
            .unwrap();
        assert_eq!(page.total as u64, TASKS * TRACES + TRACES);
        if page.traces.is_empty() {
            break;
        }
        for trace in &page.traces {
            assert_eq!(trace.root.span_id, "root", "{}", trace.root.trace_id);
            let want = if trace.root.trace_id.starts_with("shared-") {
                TASKS as usize
            } else {
                2
            };
            assert_eq!(trace.span_count, want, "{}", trace.root.trace_id);
            total += trace.span_count;
        }
        page_no += 1;
    }
    assert_eq!(total as u64, TASKS * TRACES * 2 + TRACES * TASKS);
}
