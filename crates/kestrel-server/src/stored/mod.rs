//! Stored agents and their versions over HTTP, in Mastra's shapes (`/stored/agents…`, which
//! `@mastra/client-js`'s `createStoredAgent`, `getStoredAgent(..)` and `agent.listVersions`
//! call): agents defined in the storage alone, and the versions of agents written in code
//! (same routes, same id). Every version is checked against the instance before it is stored
//! or published ([`Kestrel::check_agent_config`](kestrel_core::kestrel::Kestrel::check_agent_config)):
//! a tool, sub-agent or model the instance lacks, or a field a code agent keeps, is a 422
//! naming it. Writes are refused to tokens pinned to a resource: an agent's instructions are
//! the operator's.

mod bodies;
mod responses;
mod versions;

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::version::AgentConfig;
use kestrel_storage::{AgentVersion, NewAgentVersion, NewStoredAgent, StorageError, StoredAgent};

use crate::auth::Caller;
use crate::error::version_error;
use crate::extract::Query;
use crate::lookup::memory;
use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};
use bodies::{ConfigBody, CreateBody, ListQuery, StatusQuery, UpdateBody};
use responses::{
    StoredAgentBody, StoredAgentsPage, StoredDeleted, VersionActivated, VersionBody,
    VersionComparison, VersionsPage,
};
use versions::{
    activate_version, compare_versions, create_version, delete_version, get_version, list_versions,
    restore_version,
};

type Shared = State<Arc<AppState>>;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    const STORED: &str = "stored agents";
    const TAKEN: &str = "An agent (in code or stored) has this id";
    Routes::new()
        .get(
            "/stored/agents",
            list_agents,
            Doc::json(STORED, "List the stored agents and the code agents with versions")
                .query::<ListQuery>()
                .returns::<StoredAgentsPage>(),
        )
        .post(
            "/stored/agents",
            create_agent,
            Doc::json(STORED, "Create a stored agent with its first version")
                .body::<CreateBody>()
                .returns::<StoredAgentBody>()
                .created()
                .conflict(TAKEN),
        )
        .get(
            "/stored/agents/{agent_id}",
            get_agent,
            Doc::json(STORED, "A stored agent, seen through its published version or its draft")
                .query::<StatusQuery>()
                .returns::<StoredAgentBody>(),
        )
        .patch(
            "/stored/agents/{agent_id}",
            update_agent,
            Doc::json(
                STORED,
                "Change a stored agent: a new version over the latest, published unless publishOnSave is false",
            )
            .body::<UpdateBody>()
            .returns::<StoredAgentBody>(),
        )
        .delete(
            "/stored/agents/{agent_id}",
            delete_agent,
            Doc::json(STORED, "Delete a stored agent and its versions").returns::<StoredDeleted>(),
        )
        .get(
            "/stored/agents/{agent_id}/versions",
            list_versions,
            Doc::json(STORED, "List an agent's versions, newest first")
                .query::<ListQuery>()
                .returns::<VersionsPage>(),
        )
        .post(
            "/stored/agents/{agent_id}/versions",
            create_version,
            Doc::json(
                STORED,
                "Save a version (a draft): the latest version with the fields given over it",
            )
            .body::<UpdateBody>()
            .returns::<VersionBody>()
            .created(),
        )
        .get(
            "/stored/agents/{agent_id}/versions/compare",
            compare_versions,
            Doc::json(STORED, "The fields two versions set differently")
                .query::<bodies::CompareQuery>()
                .returns::<VersionComparison>(),
        )
        .get(
            "/stored/agents/{agent_id}/versions/{version_id}",
            get_version,
            Doc::json(STORED, "One version").returns::<VersionBody>(),
        )
        .post(
            "/stored/agents/{agent_id}/versions/{version_id}/activate",
            activate_version,
            Doc::json(STORED, "Publish a version").returns::<VersionActivated>(),
        )
        .post(
            "/stored/agents/{agent_id}/versions/{version_id}/restore",
            restore_version,
            Doc::json(STORED, "Save an old version's definition as the new latest version")
                .returns::<VersionBody>()
                .created(),
        )
        .delete(
            "/stored/agents/{agent_id}/versions/{version_id}",
            delete_version,
            Doc::json(STORED, "Delete a version (not the published one)")
                .returns::<StoredDeleted>()
                .conflict("The version is the published one"),
        )
}

struct Page {
    page: usize,
    per_page: usize,
}

impl Page {
    fn of(page: Option<u32>, per_page: Option<u32>) -> Result<Page, ApiError> {
        let per_page = per_page.unwrap_or(100);
        if !(1..=1000).contains(&per_page) {
            return Err(ApiError::invalid_query("perPage must be 1 to 1,000"));
        }
        Ok(Page {
            page: page.unwrap_or(0) as usize,
            per_page: per_page as usize,
        })
    }

    /// `items`' page: what is on it, the total, and whether more follow.
    fn cut<T>(&self, items: Vec<T>) -> (Vec<T>, usize, bool) {
        let total = items.len();
        let start = self.page.saturating_mul(self.per_page);
        let page: Vec<T> = items.into_iter().skip(start).take(self.per_page).collect();
        let has_more = start.saturating_add(page.len()) < total;
        (page, total, has_more)
    }
}

// --- errors -----------------------------------------------------------------------------

fn storage_error(error: StorageError) -> ApiError {
    match error {
        e @ (StorageError::AgentNotFound { .. } | StorageError::VersionNotFound { .. }) => {
            ApiError::not_found(e.to_string())
        }
        e @ StorageError::AgentExists { .. } => {
            ApiError::new(StatusCode::CONFLICT, "agent_exists", e.to_string())
        }
        e @ StorageError::VersionPublished { .. } => {
            ApiError::new(StatusCode::CONFLICT, "version_published", e.to_string())
        }
        other => crate::error::storage_error(other),
    }
}

fn refuse_pinned(caller: &Caller) -> Result<(), ApiError> {
    match &caller.resource {
        Some(_) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a token pinned to a resource cannot change agents",
        )),
        None => Ok(()),
    }
}

// --- JSON -------------------------------------------------------------------------------

fn parse_config(version: &AgentVersion) -> Result<AgentConfig, ApiError> {
    serde_json::from_value(version.config.clone()).map_err(|e| {
        ApiError::internal(&format!(
            "version {} of agent {} does not parse: {e}",
            version.id, version.agent_id
        ))
    })
}

// --- the storage ------------------------------------------------------------------------

fn storage(state: &AppState) -> Result<&Arc<dyn kestrel_storage::Storage>, ApiError> {
    Ok(memory(state)?.storage())
}

async fn stored(state: &AppState, agent_id: &str) -> Result<StoredAgent, ApiError> {
    storage(state)?
        .get_stored_agent(agent_id)
        .await
        .map_err(storage_error)?
        .ok_or_else(|| ApiError::not_found(format!("agent {agent_id:?} has no stored versions")))
}

/// The agent's latest version, if any.
async fn latest(state: &AppState, agent_id: &str) -> Result<Option<AgentVersion>, ApiError> {
    Ok(versions(state, agent_id).await?.into_iter().next())
}

/// The agent's versions, newest first: none for an agent without a record.
async fn versions(state: &AppState, agent_id: &str) -> Result<Vec<AgentVersion>, ApiError> {
    match storage(state)?.list_agent_versions(agent_id).await {
        Ok(versions) => Ok(versions),
        Err(StorageError::AgentNotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(storage_error(e)),
    }
}

/// The version `status` names: the latest for `draft`; the published one, else (a stored
/// agent) the latest, for `published`.
async fn version_for(
    state: &AppState,
    agent: &StoredAgent,
    status: Option<kestrel_core::version::VersionStatus>,
) -> Result<Option<AgentVersion>, ApiError> {
    use kestrel_core::version::VersionStatus;
    match (
        status.unwrap_or(VersionStatus::Published),
        &agent.active_version_id,
    ) {
        (VersionStatus::Published, Some(id)) => Ok(Some(
            storage(state)?
                .get_agent_version(&agent.id, id)
                .await
                .map_err(storage_error)?,
        )),
        (VersionStatus::Published, None) if state.kestrel.agent(&agent.id).is_ok() => Ok(None),
        _ => latest(state, &agent.id).await,
    }
}

/// Adds a version of `agent_id` made of `config`, after the instance checked it; creates the
/// agent's record first for a code agent that has none.
async fn add_version(
    state: &AppState,
    agent_id: &str,
    config: &AgentConfig,
    previous: Option<&AgentConfig>,
    change_message: Option<String>,
) -> Result<AgentVersion, ApiError> {
    let storage = storage(state)?;
    let exists = storage
        .get_stored_agent(agent_id)
        .await
        .map_err(storage_error)?
        .is_some();
    if !exists && state.kestrel.agent(agent_id).is_err() {
        return Err(ApiError::not_found(format!(
            "no agent {agent_id:?}: create a stored agent with POST /api/stored/agents"
        )));
    }
    state
        .kestrel
        .check_agent_config(agent_id, config)
        .map_err(version_error)?;
    let changed_fields = previous
        .map(|p| p.changed_fields(config))
        .unwrap_or_else(|| config.fields())
        .into_iter()
        .map(str::to_owned)
        .collect();
    let version = NewAgentVersion {
        config: serde_json::to_value(config).map_err(|e| ApiError::internal(&e))?,
        changed_fields,
        change_message,
    };
    if exists {
        return storage
            .add_agent_version(agent_id, version)
            .await
            .map_err(storage_error);
    }
    match storage
        .create_stored_agent(NewStoredAgent {
            id: agent_id.to_owned(),
            version: version.clone(),
            ..Default::default()
        })
        .await
    {
        Ok((_, version)) => Ok(version),
        // Another request created it meanwhile: add to it.
        Err(StorageError::AgentExists { .. }) => storage
            .add_agent_version(agent_id, version)
            .await
            .map_err(storage_error),
        Err(e) => Err(storage_error(e)),
    }
}

// --- handlers ---------------------------------------------------------------------------

async fn list_agents(
    State(state): Shared,
    Query(query): Query<ListQuery>,
) -> Result<Json<StoredAgentsPage>, ApiError> {
    use kestrel_core::version::VersionStatus;
    let page = Page::of(query.page, query.per_page)?;
    let agents = storage(&state)?
        .list_stored_agents()
        .await
        .map_err(storage_error)?;
    let listed: Vec<StoredAgent> = agents
        .into_iter()
        .filter(|agent| match query.status {
            Some(VersionStatus::Published) => agent.active_version_id.is_some(),
            Some(VersionStatus::Draft) => agent.active_version_id.is_none(),
            None => true,
        })
        .collect();
    // Only the agents on the page have their version read.
    let (listed, total, has_more) = page.cut(listed);
    let mut agents = Vec::with_capacity(listed.len());
    for agent in listed {
        let version = version_for(&state, &agent, None).await?;
        agents.push(StoredAgentBody::new(&state, &agent, version.as_ref()));
    }
    Ok(Json(StoredAgentsPage {
        agents,
        total,
        page: page.page,
        per_page: page.per_page,
        has_more,
    }))
}

async fn create_agent(
    State(state): Shared,
    caller: Caller,
    Body(body): Body<CreateBody>,
) -> Result<(StatusCode, Json<StoredAgentBody>), ApiError> {
    refuse_pinned(&caller)?;
    let id = match (&body.id, &body.name) {
        (Some(id), _) => id.clone(),
        (None, Some(name)) => slug(name).ok_or_else(|| {
            ApiError::invalid("name has no letter or digit to make an id of: give an id")
        })?,
        (None, None) => return Err(ApiError::invalid("a stored agent needs an id or a name")),
    };
    if state.kestrel.agent(&id).is_ok() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "agent_exists",
            format!(
                "agent {id:?} is defined in code: save its versions with POST /api/stored/agents/{id}/versions"
            ),
        ));
    }
    let config = ConfigBody {
        name: body.name,
        description: body.description,
        instructions: Some(body.instructions),
        model: body.model,
        tools: body.tools,
        tool_descriptions: body.tool_descriptions,
        agents: body.agents,
        default_options: body.default_options,
        memory: body.memory,
    }
    .over(&AgentConfig::default())?;
    state
        .kestrel
        .check_agent_config(&id, &config)
        .map_err(version_error)?;
    let (agent, version) = storage(&state)?
        .create_stored_agent(NewStoredAgent {
            id,
            metadata: body.metadata.unwrap_or_default(),
            version: NewAgentVersion {
                config: serde_json::to_value(&config).map_err(|e| ApiError::internal(&e))?,
                changed_fields: config.fields().into_iter().map(str::to_owned).collect(),
                change_message: body.change_message,
            },
            publish: body.publish_on_save.unwrap_or(true),
        })
        .await
        .map_err(storage_error)?;
    Ok((
        StatusCode::CREATED,
        Json(StoredAgentBody::new(&state, &agent, Some(&version))),
    ))
}

/// An id made of a name: lowercase letters and digits, other runs of characters as `-`.
fn slug(name: &str) -> Option<String> {
    let mut id = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.is_empty() && !id.ends_with('-') {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-');
    (!id.is_empty()).then(|| id.chars().take(crate::wire::MAX_ID_LEN).collect())
}

async fn get_agent(
    State(state): Shared,
    Path(agent_id): Path<String>,
    Query(query): Query<StatusQuery>,
) -> Result<Json<StoredAgentBody>, ApiError> {
    let agent = stored(&state, &agent_id).await?;
    let version = version_for(&state, &agent, query.status).await?;
    Ok(Json(StoredAgentBody::new(&state, &agent, version.as_ref())))
}

async fn update_agent(
    State(state): Shared,
    caller: Caller,
    Path(agent_id): Path<String>,
    Body(body): Body<UpdateBody>,
) -> Result<Json<StoredAgentBody>, ApiError> {
    refuse_pinned(&caller)?;
    let latest_version = latest(&state, &agent_id).await?;
    let base = match &latest_version {
        Some(version) => parse_config(version)?,
        None if state.kestrel.agent(&agent_id).is_ok() => AgentConfig::default(),
        None => return Err(ApiError::not_found(format!("no stored agent {agent_id:?}"))),
    };
    let (fields, change_message, publish) = body.into_parts();
    let config = fields.over(&base)?;
    let version = match latest_version {
        // Nothing changed: no new version (Mastra's auto-versioning).
        Some(version) if config == base => version,
        _ => add_version(&state, &agent_id, &config, Some(&base), change_message).await?,
    };
    let agent = if publish.unwrap_or(true) {
        storage(&state)?
            .activate_agent_version(&agent_id, Some(&version.id))
            .await
            .map_err(storage_error)?
    } else {
        stored(&state, &agent_id).await?
    };
    Ok(Json(StoredAgentBody::new(&state, &agent, Some(&version))))
}

async fn delete_agent(
    State(state): Shared,
    caller: Caller,
    Path(agent_id): Path<String>,
) -> Result<Json<StoredDeleted>, ApiError> {
    refuse_pinned(&caller)?;
    let deleted = storage(&state)?
        .delete_stored_agent(&agent_id)
        .await
        .map_err(storage_error)?;
    if !deleted {
        return Err(ApiError::not_found(format!("no stored agent {agent_id:?}")));
    }
    Ok(Json(StoredDeleted {
        success: true,
        message: format!("agent {agent_id:?} and its versions were deleted"),
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn ids_are_made_of_names() {
        assert_eq!(slug("Support Agent (v2)").unwrap(), "support-agent-v2");
        assert_eq!(slug("  --Écrivain--  ").unwrap(), "crivain");
        assert!(slug("¿¡").is_none());
    }
}
