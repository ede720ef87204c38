//! The datasets and experiments of [`SqliteStorage`]: a row per dataset, per content of an
//! item (each dataset version that changed it), per experiment and per result, each with its
//! record's JSON. A change of items is one transaction on the single writer.

use async_trait::async_trait;
use kestrel_core::store::{
    DatasetItemRecord, DatasetPage, DatasetQuery, DatasetRecord, DatasetStore, DatasetStoreError,
    ExperimentRecord, ExperimentResultRecord, ItemChange, check_item_changes, items_at,
};
use rusqlite::{OptionalExtension, params};

use super::conn::Cost;
use super::{SqliteStorage, err};
use crate::datasets::{
    Found, check_changes, check_dataset, check_experiment, check_result, dataset_err, decode,
    encode, millis, now_ms,
};

/// Runs `upsert` with `values` in a transaction, once the row of `parent_id` that
/// `parent_sql` (`SELECT 1 ... WHERE id = ?1`) looks for is kept.
fn upsert_child(
    conn: &mut rusqlite::Connection,
    op: &'static str,
    parent_sql: &str,
    parent_id: &str,
    upsert: &str,
    values: &[&dyn rusqlite::ToSql],
) -> crate::error::Result<Found<()>> {
    let tx = conn.transaction().map_err(err(op))?;
    let kept: Option<i64> = tx
        .query_row(parent_sql, [parent_id], |r| r.get(0))
        .optional()
        .map_err(err(op))?;
    if kept.is_none() {
        return Ok(Found::Missing);
    }
    tx.execute(upsert, values).map_err(err(op))?;
    tx.commit().map_err(err(op))?;
    Ok(Found::Done(()))
}

#[async_trait]
impl DatasetStore for SqliteStorage {
    async fn create_dataset(&self, dataset: &DatasetRecord) -> Result<(), DatasetStoreError> {
        const OP: &str = "create_dataset";
        check_dataset(dataset).map_err(dataset_err)?;
        let mut record = dataset.clone();
        record.version = 0;
        let json = encode("dataset", &record).map_err(dataset_err)?;
        let (id, created) = (record.id.clone(), millis(record.created_at));
        let found = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                let inserted = conn
                    .prepare_cached(
                        "INSERT INTO datasets (id, version, created_at, record) \
                         VALUES (?1, 0, ?2, ?3) ON CONFLICT (id) DO NOTHING",
                    )
                    .and_then(|mut s| s.execute(params![id, created, json]))
                    .map_err(err(OP))?;
                Ok(if inserted == 1 {
                    Found::Done(())
                } else {
                    Found::Exists
                })
            })
            .await
            .map_err(dataset_err)?;
        match found {
            Found::Done(()) => Ok(()),
            _ => Err(DatasetStoreError::DatasetExists(dataset.id.clone())),
        }
    }

    async fn get_dataset(&self, id: &str) -> Result<Option<DatasetRecord>, DatasetStoreError> {
        const OP: &str = "get_dataset";
        let id = id.to_owned();
        let json: Option<String> = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                conn.prepare_cached("SELECT record FROM datasets WHERE id = ?1")
                    .and_then(|mut s| s.query_row([&id], |r| r.get(0)).optional())
                    .map_err(err(OP))
            })
            .await
            .map_err(dataset_err)?;
        json.as_deref()
            .map(|j| decode("dataset", j))
            .transpose()
            .map_err(dataset_err)
    }

    async fn list_datasets(&self, query: &DatasetQuery) -> Result<DatasetPage, DatasetStoreError> {
        const OP: &str = "list_datasets";
        let size = i64::from(query.page_size());
        let offset = i64::from(query.page).saturating_mul(size);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let total: i64 = tx
                    .query_row("SELECT COUNT(*) FROM datasets", [], |r| r.get(0))
                    .map_err(err(OP))?;
                let rows = tx
                    .prepare_cached(
                        "SELECT record FROM datasets ORDER BY created_at DESC, id DESC \
                         LIMIT ?1 OFFSET ?2",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![size, offset], |r| r.get::<_, String>(0))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .map_err(err(OP))?;
                tx.finish().map_err(err(OP))?;
                Ok((total, rows))
            })
            .await
            .map_err(dataset_err)?;
        let datasets = rows
            .iter()
            .map(|json| decode("dataset", json))
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(dataset_err)?;
        Ok(DatasetPage::new(
            datasets,
            usize::try_from(total).unwrap_or(0),
        ))
    }

    async fn delete_dataset(&self, id: &str) -> Result<bool, DatasetStoreError> {
        const OP: &str = "delete_dataset";
        let id = id.to_owned();
        self.conns
            .write(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                tx.execute(
                    "DELETE FROM experiment_results WHERE experiment_id IN \
                     (SELECT id FROM experiments WHERE dataset_id = ?1)",
                    [&id],
                )
                .map_err(err(OP))?;
                tx.execute("DELETE FROM experiments WHERE dataset_id = ?1", [&id])
                    .map_err(err(OP))?;
                tx.execute("DELETE FROM dataset_items WHERE dataset_id = ?1", [&id])
                    .map_err(err(OP))?;
                let deleted = tx
                    .execute("DELETE FROM datasets WHERE id = ?1", [&id])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(deleted == 1)
            })
            .await
            .map_err(dataset_err)
    }

    async fn change_dataset_items(
        &self,
        dataset_id: &str,
        changes: &[ItemChange],
    ) -> Result<u32, DatasetStoreError> {
        const OP: &str = "change_dataset_items";
        check_item_changes(dataset_id, changes)?;
        check_changes(changes).map_err(dataset_err)?;
        // Encoded before the writer is taken; the version is set on each row in the
        // transaction that takes it.
        let rows = changes
            .iter()
            .map(|change| match change {
                ItemChange::Put(item) => Ok((item.id.clone(), Some(item.clone()))),
                ItemChange::Delete(id) => Ok((id.clone(), None)),
            })
            .collect::<Result<Vec<(String, Option<DatasetItemRecord>)>, DatasetStoreError>>()?;
        let id = dataset_id.to_owned();
        let found = self
            .conns
            .write(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let current: Option<(i64, String)> = tx
                    .query_row(
                        "SELECT version, record FROM datasets WHERE id = ?1",
                        [&id],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(err(OP))?;
                let Some((version, record)) = current else {
                    return Ok(Found::Missing);
                };
                if rows.is_empty() {
                    return Ok(Found::Done(u32::try_from(version).unwrap_or(0)));
                }
                let next = version + 1;
                let next_u32 = u32::try_from(next).unwrap_or(u32::MAX);
                {
                    let mut insert = tx
                        .prepare_cached(
                            "INSERT INTO dataset_items (dataset_id, item_id, version, deleted, \
                             record) VALUES (?1, ?2, ?3, ?4, ?5)",
                        )
                        .map_err(err(OP))?;
                    for (item_id, item) in &rows {
                        let json = match item {
                            Some(item) => {
                                let mut item = item.clone();
                                item.dataset_version = next_u32;
                                Some(encode("item", &item)?)
                            }
                            None => None,
                        };
                        insert
                            .execute(params![id, item_id, next, item.is_none(), json])
                            .map_err(err(OP))?;
                    }
                }
                let mut dataset: DatasetRecord = decode("dataset", &record)?;
                dataset.version = next_u32;
                dataset.updated_at = now_ms();
                tx.execute(
                    "UPDATE datasets SET version = ?2, record = ?3 WHERE id = ?1",
                    params![id, next, encode("dataset", &dataset)?],
                )
                .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(Found::Done(next_u32))
            })
            .await
            .map_err(dataset_err)?;
        match found {
            Found::Done(version) => Ok(version),
            _ => Err(DatasetStoreError::DatasetNotFound(dataset_id.to_owned())),
        }
    }

    async fn list_dataset_items(
        &self,
        dataset_id: &str,
        version: Option<u32>,
    ) -> Result<Vec<DatasetItemRecord>, DatasetStoreError> {
        const OP: &str = "list_dataset_items";
        let id = dataset_id.to_owned();
        let found = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let current: Option<i64> = tx
                    .query_row("SELECT version FROM datasets WHERE id = ?1", [&id], |r| {
                        r.get(0)
                    })
                    .optional()
                    .map_err(err(OP))?;
                let Some(current) = current else {
                    return Ok(None);
                };
                let at = version.map_or(current, i64::from);
                let rows = tx
                    .prepare_cached(
                        "SELECT version, item_id, record FROM dataset_items \
                         WHERE dataset_id = ?1 AND version <= ?2",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![id, at], |r| {
                            Ok((
                                r.get::<_, i64>(0)?,
                                r.get::<_, String>(1)?,
                                r.get::<_, Option<String>>(2)?,
                            ))
                        })?
                        .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .map_err(err(OP))?;
                tx.finish().map_err(err(OP))?;
                Ok(Some((at, rows)))
            })
            .await
            .map_err(dataset_err)?;
        let Some((at, rows)) = found else {
            return Err(DatasetStoreError::DatasetNotFound(dataset_id.to_owned()));
        };
        let versions = rows
            .into_iter()
            .map(|(v, item_id, json)| {
                let item = json
                    .as_deref()
                    .map(|j| decode::<DatasetItemRecord>("item", j))
                    .transpose()?;
                Ok((u32::try_from(v).unwrap_or(0), item_id, item))
            })
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(dataset_err)?;
        Ok(items_at(versions, u32::try_from(at).unwrap_or(0)))
    }

    async fn save_experiment(
        &self,
        experiment: &ExperimentRecord,
    ) -> Result<(), DatasetStoreError> {
        const OP: &str = "save_experiment";
        check_experiment(experiment).map_err(dataset_err)?;
        let json = encode("experiment", experiment).map_err(dataset_err)?;
        let (id, dataset, created) = (
            experiment.id.clone(),
            experiment.dataset_id.clone(),
            millis(experiment.created_at),
        );
        let found = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                upsert_child(
                    conn,
                    OP,
                    "SELECT 1 FROM datasets WHERE id = ?1",
                    &dataset,
                    "INSERT INTO experiments (id, dataset_id, created_at, record) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (id) DO UPDATE SET \
                     dataset_id = excluded.dataset_id, created_at = excluded.created_at, \
                     record = excluded.record",
                    params![id, dataset, created, json],
                )
            })
            .await
            .map_err(dataset_err)?;
        match found {
            Found::Done(()) => Ok(()),
            _ => Err(DatasetStoreError::DatasetNotFound(
                experiment.dataset_id.clone(),
            )),
        }
    }

    async fn get_experiment(
        &self,
        id: &str,
    ) -> Result<Option<ExperimentRecord>, DatasetStoreError> {
        const OP: &str = "get_experiment";
        let id = id.to_owned();
        let json: Option<String> = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                conn.prepare_cached("SELECT record FROM experiments WHERE id = ?1")
                    .and_then(|mut s| s.query_row([&id], |r| r.get(0)).optional())
                    .map_err(err(OP))
            })
            .await
            .map_err(dataset_err)?;
        json.as_deref()
            .map(|j| decode("experiment", j))
            .transpose()
            .map_err(dataset_err)
    }

    async fn list_experiments(
        &self,
        dataset_id: Option<&str>,
        query: &DatasetQuery,
    ) -> Result<(Vec<ExperimentRecord>, usize), DatasetStoreError> {
        const OP: &str = "list_experiments";
        let dataset = dataset_id.map(str::to_owned);
        let size = i64::from(query.page_size());
        let offset = i64::from(query.page).saturating_mul(size);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let total: i64 = tx
                    .query_row(
                        "SELECT COUNT(*) FROM experiments WHERE ?1 IS NULL OR dataset_id = ?1",
                        [&dataset],
                        |r| r.get(0),
                    )
                    .map_err(err(OP))?;
                let rows = tx
                    .prepare_cached(
                        "SELECT record FROM experiments WHERE ?1 IS NULL OR dataset_id = ?1 \
                         ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![dataset, size, offset], |r| r.get::<_, String>(0))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .map_err(err(OP))?;
                tx.finish().map_err(err(OP))?;
                Ok((total, rows))
            })
            .await
            .map_err(dataset_err)?;
        let experiments = rows
            .iter()
            .map(|json| decode("experiment", json))
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(dataset_err)?;
        Ok((experiments, usize::try_from(total).unwrap_or(0)))
    }

    async fn save_experiment_result(
        &self,
        result: &ExperimentResultRecord,
    ) -> Result<(), DatasetStoreError> {
        const OP: &str = "save_experiment_result";
        check_result(result).map_err(dataset_err)?;
        let json = encode("result", result).map_err(dataset_err)?;
        let (id, experiment, item) = (
            result.id.clone(),
            result.experiment_id.clone(),
            result.item_id.clone(),
        );
        let found = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                upsert_child(
                    conn,
                    OP,
                    "SELECT 1 FROM experiments WHERE id = ?1",
                    &experiment,
                    "INSERT INTO experiment_results (id, experiment_id, item_id, record) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (id) DO UPDATE SET \
                     experiment_id = excluded.experiment_id, item_id = excluded.item_id, \
                     record = excluded.record",
                    params![id, experiment, item, json],
                )
            })
            .await
            .map_err(dataset_err)?;
        match found {
            Found::Done(()) => Ok(()),
            _ => Err(DatasetStoreError::ExperimentNotFound(
                result.experiment_id.clone(),
            )),
        }
    }

    async fn list_experiment_results(
        &self,
        experiment_id: &str,
    ) -> Result<Vec<ExperimentResultRecord>, DatasetStoreError> {
        const OP: &str = "list_experiment_results";
        let id = experiment_id.to_owned();
        let rows: Vec<String> = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                conn.prepare_cached(
                    "SELECT record FROM experiment_results WHERE experiment_id = ?1 \
                     ORDER BY item_id, id",
                )
                .and_then(|mut s| {
                    s.query_map([&id], |r| r.get::<_, String>(0))?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(err(OP))
            })
            .await
            .map_err(dataset_err)?;
        rows.iter()
            .map(|json| decode("result", json))
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(dataset_err)
    }
}
