//! The skills of agents: `GET /agents/{id}/skills/{name}` (Mastra's route and shape) gives one
//! skill whole, and agent descriptions list their skills. An agent with a skills function is
//! described with the skills it gives an empty request context.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use kestrel_core::agent::Agent;
use kestrel_core::context::RequestContext;
use kestrel_core::skill::{Skill, SkillError};
use serde_json::{Value, json};

use crate::openapi::{Doc, Routes};
use crate::routes::agent;
use crate::{ApiError, AppState};

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new().get(
        "/agents/{agent_id}/skills/{skill_name}",
        get_skill,
        Doc::json(
            "skills",
            "Describe one of the agent's skills: its instructions and files",
        ),
    )
}

/// A skill's metadata, as agent descriptions list it.
fn metadata_json(skill: &Skill) -> Value {
    let mut json = serde_json::to_value(skill.metadata()).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut json {
        map.insert("path".into(), json!(skill.path()));
    }
    json
}

/// The skills an agent describes itself with, sorted by name. A skills function that fails
/// is logged and lists none: one agent's broken function must not break the agents list.
pub(crate) async fn skills_json(agent: &Agent) -> Vec<Value> {
    if !agent.has_skills() {
        return Vec::new();
    }
    match agent.skills(&RequestContext::new()).await {
        Ok(skills) => skills.iter().map(metadata_json).collect(),
        Err(e) => {
            tracing::warn!(agent = agent.id(), error = %e, "the agent's skills could not be listed");
            Vec::new()
        }
    }
}

async fn get_skill(
    State(state): State<Arc<AppState>>,
    Path((agent_id, skill_name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let skills = agent
        .skills(&RequestContext::new())
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let skill = skills.require(&skill_name).map_err(|e| match e {
        e @ SkillError::UnknownSkill { .. } => {
            ApiError::not_found(format!("agent {agent_id:?}: {e}"))
        }
        e => ApiError::internal(&e),
    })?;
    let files = skill.files().await.map_err(|e| ApiError::internal(&e))?;
    let mut json = metadata_json(skill);
    if let Value::Object(map) = &mut json {
        map.insert("instructions".into(), json!(skill.instructions()));
        map.insert(
            "source".into(),
            json!({"type": "local", "projectPath": skill.path()}),
        );
        map.insert("references".into(), json!(files.references));
        map.insert("scripts".into(), json!(files.scripts));
        map.insert("assets".into(), json!(files.assets));
    }
    Ok(Json(json))
}
