//! The datasets and experiments of [`PostgresStorage`]: a row per dataset, per content of an
//! item (each dataset version that changed it), per experiment and per result, each with its
//! record's JSON. A change of items locks its dataset's row, so concurrent changes get
//! successive versions.

use async_trait::async_trait;
use kestrel_core::store::{
    DatasetItemRecord, DatasetPage, DatasetQuery, DatasetRecord, DatasetStore, DatasetStoreError,
    ExperimentRecord, ExperimentResultRecord, ItemChange, check_item_changes, items_at,
};
use sqlx::Row;

use super::{PostgresStorage, err};
use crate::datasets::{
    Found, check_changes, check_dataset, check_experiment, check_result, dataset_err, decode,
    encode, millis, now_ms,
};
use crate::error::Result;

impl PostgresStorage {
    async fn insert_dataset(&self, dataset: &DatasetRecord) -> Result<Found<()>> {
        const OP: &str = "create_dataset";
        check_dataset(dataset)?;
        let mut record = dataset.clone();
        record.version = 0;
        let inserted = sqlx::query(
            "INSERT INTO datasets (id, version, created_at, record) VALUES ($1, 0, $2, $3) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&record.id)
        .bind(millis(record.created_at))
        .bind(encode("dataset", &record)?)
        .execute(&self.pool)
        .await
        .map_err(err(OP))?
        .rows_affected();
        Ok(if inserted == 1 {
            Found::Done(())
        } else {
            Found::Exists
        })
    }

    async fn read_record<T: serde::de::DeserializeOwned>(
        &self,
        op: &'static str,
        what: &'static str,
        sql: &'static str,
        id: &str,
    ) -> Result<Option<T>> {
        let json: Option<String> = sqlx::query_scalar(sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err(op))?;
        json.as_deref().map(|j| decode(what, j)).transpose()
    }

    async fn page_of_datasets(&self, query: &DatasetQuery) -> Result<DatasetPage> {
        const OP: &str = "list_datasets";
        let size = i64::from(query.page_size());
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM datasets")
            .fetch_one(&mut *tx)
            .await
            .map_err(err(OP))?;
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT record FROM datasets ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2",
        )
        .bind(size)
        .bind(i64::from(query.page).saturating_mul(size))
        .fetch_all(&mut *tx)
        .await
        .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        let datasets = rows
            .iter()
            .map(|json| decode("dataset", json))
            .collect::<Result<Vec<_>>>()?;
        Ok(DatasetPage::new(
            datasets,
            usize::try_from(total).unwrap_or(0),
        ))
    }

    async fn remove_dataset(&self, id: &str) -> Result<bool> {
        const OP: &str = "delete_dataset";
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        for sql in [
            "DELETE FROM experiment_results WHERE experiment_id IN \
             (SELECT id FROM experiments WHERE dataset_id = $1)",
            "DELETE FROM experiments WHERE dataset_id = $1",
            "DELETE FROM dataset_items WHERE dataset_id = $1",
        ] {
            sqlx::query(sql)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
        }
        let deleted = sqlx::query("DELETE FROM datasets WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?
            .rows_affected();
        tx.commit().await.map_err(err(OP))?;
        Ok(deleted == 1)
    }

    async fn write_changes(&self, dataset_id: &str, changes: &[ItemChange]) -> Result<Found<u32>> {
        const OP: &str = "change_dataset_items";
        check_changes(changes)?;
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        let current = sqlx::query("SELECT version, record FROM datasets WHERE id = $1 FOR UPDATE")
            .bind(dataset_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err(OP))?;
        let Some(current) = current else {
            return Ok(Found::Missing);
        };
        let version: i64 = current.try_get(0).map_err(err(OP))?;
        let record: String = current.try_get(1).map_err(err(OP))?;
        if changes.is_empty() {
            return Ok(Found::Done(u32::try_from(version).unwrap_or(0)));
        }
        let next = version + 1;
        let next_u32 = u32::try_from(next).unwrap_or(u32::MAX);
        for change in changes {
            let (item_id, json) = match change {
                ItemChange::Put(item) => {
                    let mut item = item.clone();
                    item.dataset_version = next_u32;
                    (item.id.clone(), Some(encode("item", &item)?))
                }
                ItemChange::Delete(id) => (id.clone(), None),
            };
            sqlx::query(
                "INSERT INTO dataset_items (dataset_id, item_id, version, deleted, record) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(dataset_id)
            .bind(&item_id)
            .bind(next)
            .bind(json.is_none())
            .bind(json)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        }
        let mut dataset: DatasetRecord = decode("dataset", &record)?;
        dataset.version = next_u32;
        dataset.updated_at = now_ms();
        sqlx::query("UPDATE datasets SET version = $2, record = $3 WHERE id = $1")
            .bind(dataset_id)
            .bind(next)
            .bind(encode("dataset", &dataset)?)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        Ok(Found::Done(next_u32))
    }

    async fn read_items(
        &self,
        dataset_id: &str,
        version: Option<u32>,
    ) -> Result<Option<Vec<DatasetItemRecord>>> {
        const OP: &str = "list_dataset_items";
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        let current: Option<i64> = sqlx::query_scalar("SELECT version FROM datasets WHERE id = $1")
            .bind(dataset_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err(OP))?;
        let Some(current) = current else {
            return Ok(None);
        };
        let at = version.map_or(current, i64::from);
        let rows = sqlx::query(
            "SELECT version, item_id, record FROM dataset_items \
             WHERE dataset_id = $1 AND version <= $2",
        )
        .bind(dataset_id)
        .bind(at)
        .fetch_all(&mut *tx)
        .await
        .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        let versions = rows
            .iter()
            .map(|row| {
                let v: i64 = row.try_get(0).map_err(err(OP))?;
                let item_id: String = row.try_get(1).map_err(err(OP))?;
                let json: Option<String> = row.try_get(2).map_err(err(OP))?;
                let item = json
                    .as_deref()
                    .map(|j| decode::<DatasetItemRecord>("item", j))
                    .transpose()?;
                Ok((u32::try_from(v).unwrap_or(0), item_id, item))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(items_at(versions, u32::try_from(at).unwrap_or(0))))
    }

    async fn upsert_experiment(&self, experiment: &ExperimentRecord) -> Result<Found<()>> {
        const OP: &str = "save_experiment";
        check_experiment(experiment)?;
        let upsert = sqlx::query(
            "INSERT INTO experiments (id, dataset_id, created_at, record) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO UPDATE SET dataset_id = excluded.dataset_id, \
             created_at = excluded.created_at, record = excluded.record",
        )
        .bind(&experiment.id)
        .bind(&experiment.dataset_id)
        .bind(millis(experiment.created_at))
        .bind(encode("experiment", experiment)?);
        self.upsert_child(
            OP,
            "SELECT 1 FROM datasets WHERE id = $1",
            &experiment.dataset_id,
            upsert,
        )
        .await
    }

    async fn page_of_experiments(
        &self,
        dataset_id: Option<&str>,
        query: &DatasetQuery,
    ) -> Result<(Vec<ExperimentRecord>, usize)> {
        const OP: &str = "list_experiments";
        let size = i64::from(query.page_size());
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM experiments WHERE $1::text IS NULL OR dataset_id = $1",
        )
        .bind(dataset_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(err(OP))?;
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT record FROM experiments WHERE $1::text IS NULL OR dataset_id = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3",
        )
        .bind(dataset_id)
        .bind(size)
        .bind(i64::from(query.page).saturating_mul(size))
        .fetch_all(&mut *tx)
        .await
        .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        let experiments = rows
            .iter()
            .map(|json| decode("experiment", json))
            .collect::<Result<Vec<_>>>()?;
        Ok((experiments, usize::try_from(total).unwrap_or(0)))
    }

    async fn upsert_result(&self, result: &ExperimentResultRecord) -> Result<Found<()>> {
        const OP: &str = "save_experiment_result";
        check_result(result)?;
        let upsert = sqlx::query(
            "INSERT INTO experiment_results (id, experiment_id, item_id, record) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET \
             experiment_id = excluded.experiment_id, item_id = excluded.item_id, \
             record = excluded.record",
        )
        .bind(&result.id)
        .bind(&result.experiment_id)
        .bind(&result.item_id)
        .bind(encode("result", result)?);
        self.upsert_child(
            OP,
            "SELECT 1 FROM experiments WHERE id = $1",
            &result.experiment_id,
            upsert,
        )
        .await
    }

    /// Runs `upsert` in a transaction, once the row of `parent_id` that `parent_sql`
    /// (`SELECT 1 ... WHERE id = $1`) looks for is kept.
    async fn upsert_child<'q>(
        &self,
        op: &'static str,
        parent_sql: &'static str,
        parent_id: &str,
        upsert: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<Found<()>> {
        let mut tx = self.pool.begin().await.map_err(err(op))?;
        let kept: Option<i32> = sqlx::query_scalar(parent_sql)
            .bind(parent_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err(op))?;
        if kept.is_none() {
            return Ok(Found::Missing);
        }
        upsert.execute(&mut *tx).await.map_err(err(op))?;
        tx.commit().await.map_err(err(op))?;
        Ok(Found::Done(()))
    }

    async fn read_results(&self, experiment_id: &str) -> Result<Vec<ExperimentResultRecord>> {
        const OP: &str = "list_experiment_results";
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT record FROM experiment_results WHERE experiment_id = $1 \
             ORDER BY item_id, id",
        )
        .bind(experiment_id)
        .fetch_all(&self.pool)
        .await
        .map_err(err(OP))?;
        rows.iter().map(|json| decode("result", json)).collect()
    }
}

#[async_trait]
impl DatasetStore for PostgresStorage {
    async fn create_dataset(&self, dataset: &DatasetRecord) -> Result<(), DatasetStoreError> {
        match self
            .bounded("create_dataset", self.insert_dataset(dataset))
            .await
            .map_err(dataset_err)?
        {
            Found::Done(()) => Ok(()),
            _ => Err(DatasetStoreError::DatasetExists(dataset.id.clone())),
        }
    }

    async fn get_dataset(&self, id: &str) -> Result<Option<DatasetRecord>, DatasetStoreError> {
        let read = self.read_record(
            "get_dataset",
            "dataset",
            "SELECT record FROM datasets WHERE id = $1",
            id,
        );
        self.bounded("get_dataset", read).await.map_err(dataset_err)
    }

    async fn list_datasets(&self, query: &DatasetQuery) -> Result<DatasetPage, DatasetStoreError> {
        self.bounded("list_datasets", self.page_of_datasets(query))
            .await
            .map_err(dataset_err)
    }

    async fn delete_dataset(&self, id: &str) -> Result<bool, DatasetStoreError> {
        self.bounded("delete_dataset", self.remove_dataset(id))
            .await
            .map_err(dataset_err)
    }

    async fn change_dataset_items(
        &self,
        dataset_id: &str,
        changes: &[ItemChange],
    ) -> Result<u32, DatasetStoreError> {
        check_item_changes(dataset_id, changes)?;
        match self
            .bounded(
                "change_dataset_items",
                self.write_changes(dataset_id, changes),
            )
            .await
            .map_err(dataset_err)?
        {
            Found::Done(version) => Ok(version),
            _ => Err(DatasetStoreError::DatasetNotFound(dataset_id.to_owned())),
        }
    }

    async fn list_dataset_items(
        &self,
        dataset_id: &str,
        version: Option<u32>,
    ) -> Result<Vec<DatasetItemRecord>, DatasetStoreError> {
        self.bounded("list_dataset_items", self.read_items(dataset_id, version))
            .await
            .map_err(dataset_err)?
            .ok_or_else(|| DatasetStoreError::DatasetNotFound(dataset_id.to_owned()))
    }

    async fn save_experiment(
        &self,
        experiment: &ExperimentRecord,
    ) -> Result<(), DatasetStoreError> {
        match self
            .bounded("save_experiment", self.upsert_experiment(experiment))
            .await
            .map_err(dataset_err)?
        {
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
        let read = self.read_record(
            "get_experiment",
            "experiment",
            "SELECT record FROM experiments WHERE id = $1",
            id,
        );
        self.bounded("get_experiment", read)
            .await
            .map_err(dataset_err)
    }

    async fn list_experiments(
        &self,
        dataset_id: Option<&str>,
        query: &DatasetQuery,
    ) -> Result<(Vec<ExperimentRecord>, usize), DatasetStoreError> {
        self.bounded(
            "list_experiments",
            self.page_of_experiments(dataset_id, query),
        )
        .await
        .map_err(dataset_err)
    }

    async fn save_experiment_result(
        &self,
        result: &ExperimentResultRecord,
    ) -> Result<(), DatasetStoreError> {
        match self
            .bounded("save_experiment_result", self.upsert_result(result))
            .await
            .map_err(dataset_err)?
        {
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
        self.bounded("list_experiment_results", self.read_results(experiment_id))
            .await
            .map_err(dataset_err)
    }
}
