//! The datasets and experiments of [`InMemoryStorage`]: an
//! [`InMemoryDatasetStore`](kestrel_core::store::InMemoryDatasetStore), given records checked
//! as the database backends check them (see `crate::datasets`).

use async_trait::async_trait;
use kestrel_core::store::{
    DatasetItemRecord, DatasetPage, DatasetQuery, DatasetRecord, DatasetStore, DatasetStoreError,
    ExperimentRecord, ExperimentResultRecord, ItemChange,
};

use super::InMemoryStorage;
use crate::datasets::{check_changes, check_dataset, check_experiment, check_result, dataset_err};

#[async_trait]
impl DatasetStore for InMemoryStorage {
    async fn create_dataset(&self, dataset: &DatasetRecord) -> Result<(), DatasetStoreError> {
        check_dataset(dataset).map_err(dataset_err)?;
        self.datasets.create_dataset(dataset).await
    }

    async fn get_dataset(&self, id: &str) -> Result<Option<DatasetRecord>, DatasetStoreError> {
        self.datasets.get_dataset(id).await
    }

    async fn list_datasets(&self, query: &DatasetQuery) -> Result<DatasetPage, DatasetStoreError> {
        self.datasets.list_datasets(query).await
    }

    async fn delete_dataset(&self, id: &str) -> Result<bool, DatasetStoreError> {
        self.datasets.delete_dataset(id).await
    }

    async fn change_dataset_items(
        &self,
        dataset_id: &str,
        changes: &[ItemChange],
    ) -> Result<u32, DatasetStoreError> {
        check_changes(changes).map_err(dataset_err)?;
        self.datasets
            .change_dataset_items(dataset_id, changes)
            .await
    }

    async fn list_dataset_items(
        &self,
        dataset_id: &str,
        version: Option<u32>,
    ) -> Result<Vec<DatasetItemRecord>, DatasetStoreError> {
        self.datasets.list_dataset_items(dataset_id, version).await
    }

    async fn save_experiment(
        &self,
        experiment: &ExperimentRecord,
    ) -> Result<(), DatasetStoreError> {
        check_experiment(experiment).map_err(dataset_err)?;
        self.datasets.save_experiment(experiment).await
    }

    async fn get_experiment(
        &self,
        id: &str,
    ) -> Result<Option<ExperimentRecord>, DatasetStoreError> {
        self.datasets.get_experiment(id).await
    }

    async fn list_experiments(
        &self,
        dataset_id: Option<&str>,
        query: &DatasetQuery,
    ) -> Result<(Vec<ExperimentRecord>, usize), DatasetStoreError> {
        self.datasets.list_experiments(dataset_id, query).await
    }

    async fn save_experiment_result(
        &self,
        result: &ExperimentResultRecord,
    ) -> Result<(), DatasetStoreError> {
        check_result(result).map_err(dataset_err)?;
        self.datasets.save_experiment_result(result).await
    }

    async fn list_experiment_results(
        &self,
        experiment_id: &str,
    ) -> Result<Vec<ExperimentResultRecord>, DatasetStoreError> {
        self.datasets.list_experiment_results(experiment_id).await
    }
}
