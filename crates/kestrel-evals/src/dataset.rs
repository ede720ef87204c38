//! Datasets: named, versioned lists of items an experiment runs its target on.
//!
//! A [`DatasetItem`] is an input (a string for an agent, any JSON for a workflow) and what
//! the run should give: a ground truth, an expected trajectory; with tool mocks, the item's
//! run is the same every time. A [`Dataset`] is read from JSON Lines
//! ([`Dataset::from_jsonl`]) or kept in versions in a [`DatasetStore`] ([`Dataset::save`],
//! [`Dataset::load`]).

use kestrel_core::eval::ExpectedTrajectory;
use kestrel_core::store::{
    DatasetItemRecord, DatasetRecord, DatasetStore, DatasetStoreError, ItemChange,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One case of a dataset (Mastra's dataset item). Unknown fields are refused: a misspelt
/// `groundTruth` must not silently score against nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatasetItem {
    /// The item's id (its line number, from 1, when read from JSONL without one).
    #[serde(default)]
    pub id: String,
    /// What the run is given: for an agent a string (or an object whose `prompt` or `input`
    /// is one: [`DatasetItem::prompt`]), for a workflow its input, any JSON.
    pub input: Value,
    /// The answer it should give, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<Value>,
    /// The steps it should take, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_trajectory: Option<ExpectedTrajectory>,
    /// What the agent's tools answer instead of running, by tool name (`{"get_weather":
    /// {"sky": "clear"}}`): the item's run is the same every time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_mocks: Option<serde_json::Map<String, Value>>,
    /// What the answer should rest on (passages): the scorers read it as the run's additional
    /// context, which the faithfulness, hallucination and context judges check it against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<String>>,
    /// Anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl DatasetItem {
    /// The item as a store keeps it.
    pub fn to_record(&self, dataset_id: &str) -> Result<DatasetItemRecord, DatasetError> {
        let mut record = DatasetItemRecord::new(&self.id, dataset_id, self.input.clone());
        record.ground_truth.clone_from(&self.ground_truth);
        record.expected_trajectory = self
            .expected_trajectory
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| DatasetError::Item {
                id: self.id.clone(),
                message: e.to_string(),
            })?;
        record.metadata.clone_from(&self.metadata);
        record.tool_mocks = self.tool_mocks.clone().map(Value::Object);
        record.context = self.context.clone().map(Value::from);
        Ok(record)
    }

    /// What an agent is asked: the input if a string, else the `prompt` or `input` string of
    /// an object, else the input's JSON text.
    pub fn prompt(&self) -> String {
        match &self.input {
            Value::String(text) => text.clone(),
            Value::Object(map) => match map
                .get("prompt")
                .or_else(|| map.get("input"))
                .and_then(Value::as_str)
            {
                Some(text) => text.to_owned(),
                None => self.input.to_string(),
            },
            other => other.to_string(),
        }
    }

    /// The item a store keeps.
    pub fn from_record(record: &DatasetItemRecord) -> Result<Self, DatasetError> {
        let expected_trajectory = record
            .expected_trajectory
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| DatasetError::Item {
                id: record.id.clone(),
                message: format!("expectedTrajectory: {e}"),
            })?;
        let tool_mocks = match &record.tool_mocks {
            None | Some(Value::Null) => None,
            Some(Value::Object(mocks)) => Some(mocks.clone()),
            Some(_) => {
                return Err(DatasetError::Item {
                    id: record.id.clone(),
                    message: "toolMocks must be an object of results by tool name".into(),
                });
            }
        };
        let context = match &record.context {
            None | Some(Value::Null) => None,
            Some(Value::Array(passages)) => Some(
                passages
                    .iter()
                    .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                    .collect(),
            ),
            Some(_) => {
                return Err(DatasetError::Item {
                    id: record.id.clone(),
                    message: "context must be a list of passages".into(),
                });
            }
        };
        Ok(Self {
            context,
            id: record.id.clone(),
            input: record.input.clone(),
            ground_truth: record.ground_truth.clone(),
            expected_trajectory,
            tool_mocks,
            metadata: record.metadata.clone(),
        })
    }

    /// An item giving `input` (a string for an agent, any JSON for a workflow).
    pub fn new(id: impl Into<String>, input: impl Into<Value>) -> Self {
        Self {
            id: id.into(),
            input: input.into(),
            ground_truth: None,
            expected_trajectory: None,
            tool_mocks: None,
            context: None,
            metadata: None,
        }
    }

    /// What tool `tool` answers instead of running, for this item.
    pub fn tool_mock(mut self, tool: impl Into<String>, result: impl Into<Value>) -> Self {
        self.tool_mocks
            .get_or_insert_with(Default::default)
            .insert(tool.into(), result.into());
        self
    }

    /// Sets the expected answer.
    pub fn ground_truth(mut self, ground_truth: impl Into<Value>) -> Self {
        self.ground_truth = Some(ground_truth.into());
        self
    }

    /// Sets what the answer should rest on.
    pub fn context<I, S>(mut self, passages: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.context = Some(passages.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the expected steps.
    pub fn expected_trajectory(mut self, expected: ExpectedTrajectory) -> Self {
        self.expected_trajectory = Some(expected);
        self
    }
}

/// Why a dataset could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A line is not an item.
    #[error("dataset line {line}: {message}")]
    Line {
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Two items share an id.
    #[error("dataset line {line}: the id `{id}` is already used by an earlier item")]
    DuplicateId {
        /// The line, from 1.
        line: usize,
        /// The id.
        id: String,
    },
    /// No item at all.
    #[error("the dataset has no items")]
    Empty,
    /// A stored item cannot be read as an item (its expected trajectory is malformed).
    #[error("dataset item {id:?}: {message}")]
    Item {
        /// The item.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// The dataset store refused or failed.
    #[error(transparent)]
    Store(#[from] DatasetStoreError),
}

/// A named, versioned list of items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dataset {
    /// Its id.
    pub id: String,
    /// Its version (1 for a new dataset; [`Dataset::with_items`] makes the next).
    pub version: u32,
    /// Its items.
    pub items: Vec<DatasetItem>,
}

impl Dataset {
    /// Version 1 of dataset `id`, of `items`.
    pub fn new(id: impl Into<String>, items: Vec<DatasetItem>) -> Self {
        Self {
            id: id.into(),
            version: 1,
            items,
        }
    }

    /// The next version, of `items`.
    pub fn with_items(&self, items: Vec<DatasetItem>) -> Self {
        Self {
            id: self.id.clone(),
            version: self.version.saturating_add(1),
            items,
        }
    }

    /// Saves the items in `store` as a new version of dataset `id` (created, named after its
    /// id, when missing): items it has no longer are removed, the others put. This dataset
    /// then names the version saved.
    pub async fn save(&mut self, store: &dyn DatasetStore) -> Result<u32, DatasetError> {
        if store.get_dataset(&self.id).await?.is_none() {
            match store
                .create_dataset(&DatasetRecord::new(&self.id, &self.id))
                .await
            {
                // Created meanwhile by another caller: its versions go on.
                Ok(()) | Err(DatasetStoreError::DatasetExists(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let kept = store.list_dataset_items(&self.id, None).await?;
        let mut changes: Vec<ItemChange> = kept
            .iter()
            .filter(|k| !self.items.iter().any(|i| i.id == k.id))
            .map(|k| ItemChange::Delete(k.id.clone()))
            .collect();
        for item in &self.items {
            changes.push(ItemChange::Put(item.to_record(&self.id)?));
        }
        self.version = store.change_dataset_items(&self.id, &changes).await?;
        Ok(self.version)
    }

    /// Dataset `id` as `store` keeps it at `version` (default: its latest), its items in id
    /// order.
    pub async fn load(
        store: &dyn DatasetStore,
        id: &str,
        version: Option<u32>,
    ) -> Result<Self, DatasetError> {
        let Some(dataset) = store.get_dataset(id).await? else {
            return Err(DatasetStoreError::DatasetNotFound(id.to_owned()).into());
        };
        let version = version.unwrap_or(dataset.version);
        let items = store
            .list_dataset_items(id, Some(version))
            .await?
            .iter()
            .map(DatasetItem::from_record)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            id: id.to_owned(),
            version,
            items,
        })
    }

    /// Reads JSON Lines: one item a line (`{"input": ..., "groundTruth"?: ...,
    /// "expectedTrajectory"?: ..., "id"?: ...}`); blank lines are skipped; an item without an
    /// id gets its line number. Errors name the line.
    pub fn from_jsonl(id: impl Into<String>, text: &str) -> Result<Self, DatasetError> {
        let mut items: Vec<DatasetItem> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            if line.trim().is_empty() {
                continue;
            }
            let mut item: DatasetItem =
                serde_json::from_str(line).map_err(|e| DatasetError::Line {
                    line: number,
                    message: e.to_string(),
                })?;
            let empty = match &item.input {
                Value::Null => true,
                Value::String(text) => text.trim().is_empty(),
                _ => false,
            };
            if empty {
                return Err(DatasetError::Line {
                    line: number,
                    message: "`input` is empty".into(),
                });
            }
            if item.id.is_empty() {
                item.id = number.to_string();
            }
            if items.iter().any(|i| i.id == item.id) {
                return Err(DatasetError::DuplicateId {
                    line: number,
                    id: item.id,
                });
            }
            items.push(item);
        }
        if items.is_empty() {
            return Err(DatasetError::Empty);
        }
        Ok(Self::new(id, items))
    }
}
