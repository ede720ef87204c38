//! [`InMemoryVectorStore`]: exact search over contiguous rows of `f32`, in this process.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;

use super::{
    CreateIndex, IndexStats, Metadata, Metric, QueryResult, Selector, Upsert, VectorError,
    VectorQuery, VectorStore, VectorUpdate, check_index_name,
};

/// A vector store in memory: every query scores every (filtered) vector, exactly.
///
/// Vectors of an index sit in one contiguous `Vec<f32>`, so scoring is a tight loop the
/// compiler vectorises; queries run on the blocking pool, so a large index does not stall
/// the async runtime. Nothing survives the process: use it for tests, examples and small
/// corpora, and [`SqliteVectorStore`](super::sqlite::SqliteVectorStore) or
/// [`PgVectorStore`](super::pgvector::PgVectorStore) to keep vectors.
#[derive(Debug, Clone)]
pub struct InMemoryVectorStore {
    indexes: Arc<RwLock<BTreeMap<String, Index>>>,
    limits: Limits,
}

/// How much an [`InMemoryVectorStore`] holds at most: a store served over HTTP must not grow
/// without bound at its callers' request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Indexes (default 1,000).
    pub max_indexes: usize,
    /// Vector components over all indexes (default 2^26: 256 MiB of `f32`, some 175,000
    /// vectors of 384 dimensions).
    pub max_components: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_indexes: 1_000,
            max_components: 1 << 26,
        }
    }
}

impl Default for InMemoryVectorStore {
    fn default() -> Self {
        InMemoryVectorStore::with_limits(Limits::default())
    }
}

#[derive(Debug)]
struct Index {
    dimension: usize,
    metric: Metric,
    ids: Vec<String>,
    positions: HashMap<String, usize>,
    /// Row `i` is `data[i * dimension..(i + 1) * dimension]`.
    data: Vec<f32>,
    metadata: Vec<Metadata>,
}

impl Index {
    fn row(&self, position: usize) -> &[f32] {
        &self.data[position * self.dimension..(position + 1) * self.dimension]
    }

    fn put(&mut self, id: String, vector: &[f32], metadata: Metadata) {
        match self.positions.get(&id) {
            Some(&position) => {
                let start = position * self.dimension;
                self.data[start..start + self.dimension].copy_from_slice(vector);
                self.metadata[position] = metadata;
            }
            None => {
                self.positions.insert(id.clone(), self.ids.len());
                self.ids.push(id);
                self.data.extend_from_slice(vector);
                self.metadata.push(metadata);
            }
        }
    }

    fn remove(&mut self, position: usize) {
        let last = self.ids.len() - 1;
        if position != last {
            let (head, tail) = self.data.split_at_mut(last * self.dimension);
            head[position * self.dimension..(position + 1) * self.dimension]
                .copy_from_slice(&tail[..self.dimension]);
            self.ids.swap(position, last);
            self.metadata.swap(position, last);
            self.positions.insert(self.ids[position].clone(), position);
        }
        self.data.truncate(last * self.dimension);
        self.metadata.truncate(last);
        if let Some(id) = self.ids.pop() {
            self.positions.remove(&id);
        }
    }

    fn select(&self, selector: &Selector) -> Vec<usize> {
        let mut positions: Vec<usize> = match selector {
            Selector::Ids(ids) => ids
                .iter()
                .filter_map(|id| self.positions.get(id).copied())
                .collect(),
            Selector::Filter(filter) => (0..self.ids.len())
                .filter(|&i| filter.matches(&self.metadata[i]))
                .collect(),
        };
        positions.sort_unstable();
        positions.dedup();
        positions
    }
}

/// A candidate result; the heap keeps the worst of the best `k` on top.
struct Candidate<'a> {
    score: f32,
    id: &'a str,
    position: usize,
}

impl Candidate<'_> {
    /// Better is a higher score, then a smaller id.
    fn better(&self, other: &Candidate<'_>) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.id.cmp(self.id))
    }
}

impl PartialEq for Candidate<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.better(other) == Ordering::Equal
    }
}

impl Eq for Candidate<'_> {}

impl PartialOrd for Candidate<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate<'_> {
    /// Greater is worse, so `BinaryHeap::peek` is the worst kept.
    fn cmp(&self, other: &Self) -> Ordering {
        other.better(self)
    }
}

impl InMemoryVectorStore {
    /// An empty store with the default [`Limits`].
    pub fn new() -> InMemoryVectorStore {
        InMemoryVectorStore::default()
    }

    /// An empty store holding at most `limits`.
    pub fn with_limits(limits: Limits) -> InMemoryVectorStore {
        InMemoryVectorStore {
            indexes: Arc::default(),
            limits,
        }
    }

    fn read<R>(&self, f: impl FnOnce(&BTreeMap<String, Index>) -> R) -> R {
        f(&self.indexes.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn write<R>(&self, f: impl FnOnce(&mut BTreeMap<String, Index>) -> R) -> R {
        f(&mut self.indexes.write().unwrap_or_else(PoisonError::into_inner))
    }
}

fn not_found(index: &str) -> VectorError {
    VectorError::IndexNotFound {
        index: index.to_owned(),
    }
}

fn run_query(index: &Index, query: &VectorQuery) -> Vec<QueryResult> {
    let filter = query.filter.as_ref().filter(|f| !f.is_empty());
    let result = |position: usize, score: f32| QueryResult {
        id: index.ids[position].clone(),
        score,
        metadata: index.metadata[position].clone(),
        vector: query.include_vector.then(|| index.row(position).to_vec()),
        document: None,
    };
    let Some(vector) = &query.query_vector else {
        let mut matching: Vec<usize> = (0..index.ids.len())
            .filter(|&i| filter.is_none_or(|f| f.matches(&index.metadata[i])))
            .collect();
        matching.sort_unstable_by(|a, b| index.ids[*a].cmp(&index.ids[*b]));
        matching.truncate(query.top_k);
        return matching.into_iter().map(|i| result(i, 0.0)).collect();
    };
    let query_norm = super::norm(vector);
    let mut heap: BinaryHeap<Candidate<'_>> = BinaryHeap::with_capacity(query.top_k + 1);
    for position in 0..index.ids.len() {
        if let Some(filter) = filter
            && !filter.matches(&index.metadata[position])
        {
            continue;
        }
        let score = index.metric.score(vector, query_norm, index.row(position));
        if query.min_score.is_some_and(|min| score < min) {
            continue;
        }
        let candidate = Candidate {
            score,
            id: &index.ids[position],
            position,
        };
        if heap.len() < query.top_k {
            heap.push(candidate);
        } else if let Some(worst) = heap.peek()
            && candidate.better(worst) == Ordering::Greater
        {
            heap.pop();
            heap.push(candidate);
        }
    }
    // Ascending by `Ord` is best first.
    heap.into_sorted_vec()
        .into_iter()
        .map(|c| result(c.position, c.score))
        .collect()
}

#[async_trait]
impl VectorStore for InMemoryVectorStore {
    async fn create_index(&self, request: CreateIndex) -> Result<(), VectorError> {
        request.check()?;
        self.write(|indexes| match indexes.get(&request.index_name) {
            Some(index)
                if index.dimension == request.dimension && index.metric == request.metric =>
            {
                Ok(())
            }
            Some(index) => Err(VectorError::IndexExists {
                index: request.index_name.clone(),
                existing_dimension: index.dimension,
                existing_metric: index.metric,
                dimension: request.dimension,
                metric: request.metric,
            }),
            None if indexes.len() >= self.limits.max_indexes => Err(VectorError::invalid(
                "indexName",
                format!(
                    "the in-memory store holds at most {} indexes; delete one first",
                    self.limits.max_indexes
                ),
            )),
            None => {
                indexes.insert(
                    request.index_name.clone(),
                    Index {
                        dimension: request.dimension,
                        metric: request.metric,
                        ids: Vec::new(),
                        positions: HashMap::new(),
                        data: Vec::new(),
                        metadata: Vec::new(),
                    },
                );
                Ok(())
            }
        })
    }

    async fn list_indexes(&self) -> Result<Vec<String>, VectorError> {
        Ok(self.read(|indexes| indexes.keys().cloned().collect()))
    }

    async fn describe_index(&self, index_name: &str) -> Result<IndexStats, VectorError> {
        self.read(|indexes| {
            let index = indexes
                .get(index_name)
                .ok_or_else(|| not_found(index_name))?;
            Ok(IndexStats {
                dimension: index.dimension,
                count: index.ids.len() as u64,
                metric: index.metric,
            })
        })
    }

    async fn delete_index(&self, index_name: &str) -> Result<(), VectorError> {
        check_index_name(index_name)?;
        self.write(|indexes| {
            indexes
                .remove(index_name)
                .map(|_| ())
                .ok_or_else(|| not_found(index_name))
        })
    }

    async fn upsert(&self, request: Upsert) -> Result<Vec<String>, VectorError> {
        check_index_name(&request.index_name)?;
        let index_name = request.index_name.clone();
        let delete_filter = request.delete_filter.clone();
        let (dimension, metric) = self.read(|indexes| {
            indexes
                .get(&index_name)
                .map(|index| (index.dimension, index.metric))
                .ok_or_else(|| not_found(&index_name))
        })?;
        let records = request.into_records(dimension, metric)?;
        let max_components = self.limits.max_components;
        self.write(|indexes| {
            if indexes.get(&index_name).map(|i| i.dimension) != Some(dimension) {
                // Deleted (or re-created with another dimension) since the check.
                return Err(not_found(&index_name));
            }
            let held: usize = indexes.values().map(|i| i.data.len()).sum();
            let adding = records
                .iter()
                .filter(|r| {
                    !indexes
                        .get(&index_name)
                        .is_some_and(|i| i.positions.contains_key(&r.id))
                })
                .count()
                * dimension;
            if held + adding > max_components {
                return Err(VectorError::invalid(
                    "vectors",
                    format!(
                        "the in-memory store holds at most {max_components} vector components \
                         and has {held}; these would add {adding}"
                    ),
                ));
            }
            let index = indexes
                .get_mut(&index_name)
                .ok_or_else(|| not_found(&index_name))?;
            if let Some(filter) = delete_filter.filter(|f| !f.is_empty()) {
                for position in index.select(&Selector::Filter(filter)).into_iter().rev() {
                    index.remove(position);
                }
            }
            let mut ids = Vec::with_capacity(records.len());
            for record in records {
                ids.push(record.id.clone());
                index.put(record.id, &record.vector, record.metadata);
            }
            Ok(ids)
        })
    }

    async fn query(&self, query: VectorQuery) -> Result<Vec<QueryResult>, VectorError> {
        let indexes = Arc::clone(&self.indexes);
        tokio::task::spawn_blocking(move || {
            let indexes = indexes.read().unwrap_or_else(PoisonError::into_inner);
            let index = indexes
                .get(&query.index_name)
                .ok_or_else(|| not_found(&query.index_name))?;
            query.check(index.dimension, index.metric)?;
            Ok(run_query(index, &query))
        })
        .await
        .map_err(|e| VectorError::backend("query", e))?
    }

    async fn update(
        &self,
        index_name: &str,
        selector: Selector,
        update: VectorUpdate,
    ) -> Result<u64, VectorError> {
        selector.check()?;
        self.write(|indexes| {
            let index = indexes
                .get_mut(index_name)
                .ok_or_else(|| not_found(index_name))?;
            update.check(index_name, index.dimension, index.metric)?;
            let positions = index.select(&selector);
            for &position in &positions {
                if let Some(vector) = &update.vector {
                    let start = position * index.dimension;
                    index.data[start..start + index.dimension].copy_from_slice(vector);
                }
                if let Some(metadata) = &update.metadata {
                    index.metadata[position] = metadata.clone();
                }
            }
            Ok(positions.len() as u64)
        })
    }

    async fn delete(&self, index_name: &str, selector: Selector) -> Result<u64, VectorError> {
        selector.check()?;
        self.write(|indexes| {
            let index = indexes
                .get_mut(index_name)
                .ok_or_else(|| not_found(index_name))?;
            let positions = index.select(&selector);
            // From the back, so a swap never moves a row still to be removed.
            for &position in positions.iter().rev() {
                index.remove(position);
            }
            Ok(positions.len() as u64)
        })
    }
}
