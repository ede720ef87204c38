//! What the listings of [`InMemoryStorage`](super::InMemoryStorage) return: messages by
//! selection, pages, the order of threads, the runs a filter matches.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::types::{
    Anchor, Direction, MessageList, Page, PageRequest, RunFilter, RunRecord, Selection, SeqRange,
    StoredMessage, Thread, ThreadOrderField,
};

pub(super) fn select(messages: &BTreeMap<i64, StoredMessage>, selection: Selection) -> MessageList {
    match selection {
        Selection::Last(n) => {
            let range = SeqRange {
                limit: Some(n),
                anchor: Anchor::End,
                ..SeqRange::default()
            };
            select_range(messages, range)
        }
        Selection::Range(range) => select_range(messages, range),
        Selection::Page(page) => {
            let all: Vec<&StoredMessage> = messages.values().collect();
            let items = paginate(&all, page.offset(), page.per_page);
            let total = all.len() as u64;
            let has_more = page.offset() + (items.len() as u64) < total;
            MessageList {
                messages: items,
                has_more,
                total: Some(total),
            }
        }
    }
}

fn select_range(messages: &BTreeMap<i64, StoredMessage>, range: SeqRange) -> MessageList {
    let lower = range.after.map_or(i64::MIN, |s| s.saturating_add(1));
    let upper = range.before.unwrap_or(i64::MAX);
    if lower >= upper {
        return MessageList {
            messages: Vec::new(),
            has_more: false,
            total: None,
        };
    }
    let inside: Vec<&StoredMessage> = messages.range(lower..upper).map(|(_, m)| m).collect();
    let limit = range.limit.map_or(inside.len(), |l| l as usize);
    let has_more = inside.len() > limit;
    let chosen = match range.anchor {
        Anchor::Start => &inside[..limit.min(inside.len())],
        Anchor::End => &inside[inside.len().saturating_sub(limit)..],
    };
    MessageList {
        messages: chosen.iter().map(|m| (*m).clone()).collect(),
        has_more,
        total: None,
    }
}

pub(super) fn paginate<T: Clone>(items: &[&T], offset: u64, per_page: u32) -> Vec<T> {
    items
        .iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(per_page as usize)
        .map(|item| (*item).clone())
        .collect()
}

/// Runs (agent or workflow runs), newest first with ties by run id descending, as the page
/// `request` asks. `key` gives a run's creation time and id.
pub(super) fn newest_first<T: Clone>(
    mut runs: Vec<&T>,
    key: impl Fn(&T) -> (DateTime<Utc>, &str),
    request: PageRequest,
) -> Page<T> {
    runs.sort_by(|a, b| key(b).cmp(&key(a)));
    let items = paginate(&runs, request.offset(), request.per_page);
    Page::new(items, request, runs.len() as u64)
}

pub(super) fn sort_threads(threads: &mut [&Thread], field: ThreadOrderField, direction: Direction) {
    threads.sort_by(|a, b| {
        let key = |t: &Thread| match field {
            ThreadOrderField::CreatedAt => t.created_at,
            ThreadOrderField::UpdatedAt => t.updated_at,
        };
        let order = key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id));
        match direction {
            Direction::Asc => order,
            Direction::Desc => order.reverse(),
        }
    });
}

pub(super) fn run_matches(run: &RunRecord, filter: &RunFilter) -> bool {
    let eq = |want: &Option<String>, have: &Option<String>| {
        want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
    };
    filter.agent_id.as_ref().is_none_or(|a| &run.agent_id == a)
        && eq(&filter.thread_id, &run.thread_id)
        && eq(&filter.resource_id, &run.resource_id)
        && eq(&filter.parent_run_id, &run.parent_run_id)
        && (filter.statuses.is_empty() || filter.statuses.contains(&run.status))
        && filter
            .created_from
            .is_none_or(|from| run.created_at >= from)
        && filter.created_to.is_none_or(|to| run.created_at < to)
}
