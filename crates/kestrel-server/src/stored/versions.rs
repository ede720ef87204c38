//! The versions routes: list, save a draft, get, publish, restore, delete, compare.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::version::AgentConfig;

use super::bodies::{CompareQuery, ListQuery, UpdateBody};
use super::responses::{
    StoredDeleted, VersionActivated, VersionBody, VersionComparison, VersionFieldDiff, VersionsPage,
};
use super::{
    Page, Shared, add_version, latest, parse_config, refuse_pinned, storage, storage_error, stored,
    versions,
};
use crate::ApiError;
use crate::auth::Caller;
use crate::error::version_error;
use crate::extract::Query;
use crate::wire::Body;

pub(super) async fn list_versions(
    State(state): Shared,
    Path(agent_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<VersionsPage>, ApiError> {
    let page = Page::of(query.page, query.per_page)?;
    let ascending = match query.direction.as_deref() {
        None => false,
        Some(d) if d.eq_ignore_ascii_case("desc") => false,
        Some(d) if d.eq_ignore_ascii_case("asc") => true,
        Some(other) => {
            return Err(ApiError::invalid_query(format!(
                "orderBy[direction] must be ASC or DESC, not {other:?}"
            )));
        }
    };
    if state.kestrel.agent(&agent_id).is_err() {
        stored(&state, &agent_id).await?;
    }
    let mut versions = versions(&state, &agent_id).await?;
    if ascending {
        versions.reverse();
    }
    let (versions, total, has_more) = page.cut(versions);
    Ok(Json(VersionsPage {
        versions: versions.iter().map(VersionBody::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
        has_more,
    }))
}

pub(super) async fn create_version(
    State(state): Shared,
    caller: Caller,
    Path(agent_id): Path<String>,
    Body(body): Body<UpdateBody>,
) -> Result<(StatusCode, Json<VersionBody>), ApiError> {
    refuse_pinned(&caller)?;
    let (fields, change_message, publish) = body.into_parts();
    let base = match latest(&state, &agent_id).await? {
        Some(version) => parse_config(&version)?,
        None => AgentConfig::default(),
    };
    let config = fields.over(&base)?;
    let version = add_version(&state, &agent_id, &config, Some(&base), change_message).await?;
    if publish == Some(true) {
        storage(&state)?
            .activate_agent_version(&agent_id, Some(&version.id))
            .await
            .map_err(storage_error)?;
    }
    Ok((StatusCode::CREATED, Json(VersionBody::from(&version))))
}

pub(super) async fn get_version(
    State(state): Shared,
    Path((agent_id, version_id)): Path<(String, String)>,
) -> Result<Json<VersionBody>, ApiError> {
    let version = storage(&state)?
        .get_agent_version(&agent_id, &version_id)
        .await
        .map_err(storage_error)?;
    Ok(Json(VersionBody::from(&version)))
}

pub(super) async fn activate_version(
    State(state): Shared,
    caller: Caller,
    Path((agent_id, version_id)): Path<(String, String)>,
) -> Result<Json<VersionActivated>, ApiError> {
    refuse_pinned(&caller)?;
    let storage = storage(&state)?;
    let version = storage
        .get_agent_version(&agent_id, &version_id)
        .await
        .map_err(storage_error)?;
    // The instance may have changed since the version was saved (a tool removed).
    state
        .kestrel
        .check_agent_config(&agent_id, &parse_config(&version)?)
        .map_err(version_error)?;
    let agent = storage
        .activate_agent_version(&agent_id, Some(&version_id))
        .await
        .map_err(storage_error)?;
    Ok(Json(VersionActivated {
        success: true,
        message: format!(
            "version {} of agent {agent_id:?} is published",
            version.version_number
        ),
        active_version_id: agent.active_version_id,
    }))
}

pub(super) async fn restore_version(
    State(state): Shared,
    caller: Caller,
    Path((agent_id, version_id)): Path<(String, String)>,
) -> Result<(StatusCode, Json<VersionBody>), ApiError> {
    refuse_pinned(&caller)?;
    let old = storage(&state)?
        .get_agent_version(&agent_id, &version_id)
        .await
        .map_err(storage_error)?;
    let config = parse_config(&old)?;
    let base = match latest(&state, &agent_id).await? {
        Some(version) => Some(parse_config(&version)?),
        None => None,
    };
    let message = format!("Restored from version {}", old.version_number);
    let version = add_version(&state, &agent_id, &config, base.as_ref(), Some(message)).await?;
    Ok((StatusCode::CREATED, Json(VersionBody::from(&version))))
}

pub(super) async fn delete_version(
    State(state): Shared,
    caller: Caller,
    Path((agent_id, version_id)): Path<(String, String)>,
) -> Result<Json<StoredDeleted>, ApiError> {
    refuse_pinned(&caller)?;
    storage(&state)?
        .delete_agent_version(&agent_id, &version_id)
        .await
        .map_err(storage_error)?;
    Ok(Json(StoredDeleted {
        success: true,
        message: format!("version {version_id:?} of agent {agent_id:?} was deleted"),
    }))
}

pub(super) async fn compare_versions(
    State(state): Shared,
    Path(agent_id): Path<String>,
    Query(query): Query<CompareQuery>,
) -> Result<Json<VersionComparison>, ApiError> {
    let storage = storage(&state)?;
    let from = storage
        .get_agent_version(&agent_id, &query.from)
        .await
        .map_err(storage_error)?;
    let to = storage
        .get_agent_version(&agent_id, &query.to)
        .await
        .map_err(storage_error)?;
    let (a, b) = (parse_config(&from)?, parse_config(&to)?);
    let (a_json, b_json) = (
        serde_json::to_value(&a).map_err(|e| ApiError::internal(&e))?,
        serde_json::to_value(&b).map_err(|e| ApiError::internal(&e))?,
    );
    let diffs = a
        .changed_fields(&b)
        .into_iter()
        .map(|field| VersionFieldDiff {
            field: field.to_owned(),
            previous_value: a_json.get(field).cloned().unwrap_or_default(),
            current_value: b_json.get(field).cloned().unwrap_or_default(),
        })
        .collect();
    Ok(Json(VersionComparison {
        diffs,
        from_version: VersionBody::from(&from),
        to_version: VersionBody::from(&to),
    }))
}
