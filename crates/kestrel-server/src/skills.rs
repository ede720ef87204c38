//! The skills of agents: `GET /agents/{id}/skills/{name}` (Mastra's route and shape) gives one
//! skill whole, and agent descriptions list their skills. An agent with a skills function is
//! described with the skills it gives an empty request context.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::Path;
use kestrel_core::agent::Agent;
use kestrel_core::context::RequestContext;
use kestrel_core::skill::{Skill, SkillError, SkillFiles, SkillMetadata};
use schemars::JsonSchema;
use serde::Serialize;

use crate::extract::AgentAccess;
use crate::openapi::{Doc, Routes};
use crate::{ApiError, AppState};

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new().get(
        "/agents/{agent_id}/skills/{skill_name}",
        get_skill,
        Doc::json(
            "skills",
            "Describe one of the agent's skills: its instructions and files",
        )
        .returns::<SkillDetail>(),
    )
}

/// A skill as agent descriptions list it: its frontmatter and where it lives.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SkillSummary {
    /// The skill's name (what `GET /agents/{agent_id}/skills/{skill_name}` takes).
    name: String,
    /// What the skill is for and when to use it.
    description: String,
    /// The license the skill is under (left out when it names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    license: Option<String>,
    /// What the skill needs from its environment (left out when it says nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compatibility: Option<String>,
    /// Its frontmatter's free string keys and values (left out when it has none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<String, String>,
    /// Where the skill is: its folder, or `inline/<name>` for one written in code.
    path: String,
}

impl SkillSummary {
    fn of(skill: &Skill) -> Self {
        let SkillMetadata {
            name,
            description,
            license,
            compatibility,
            metadata,
        } = skill.metadata().clone();
        Self {
            name,
            description,
            license,
            compatibility,
            metadata,
            path: skill.path(),
        }
    }
}

/// One skill whole, as `GET /agents/{agent_id}/skills/{skill_name}` answers (Mastra's shape).
#[derive(Debug, Serialize, JsonSchema)]
struct SkillDetail {
    /// What agent descriptions list of it.
    #[serde(flatten)]
    summary: SkillSummary,
    /// Its instructions: the markdown body of its `SKILL.md`.
    instructions: String,
    /// Where it comes from (Mastra's `source`; always `local` here).
    source: SkillSource,
    /// Documents the model may read when the instructions point to them (paths relative to
    /// the skill's folder, sorted).
    references: Vec<String>,
    /// Code the instructions may tell someone to run (relative paths, sorted).
    scripts: Vec<String>,
    /// Templates, images and other material (relative paths, sorted).
    assets: Vec<String>,
}

/// Where a skill comes from, as Mastra's `source`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SkillSource {
    /// Always `local` (Mastra also has `external` and `managed`).
    #[serde(rename = "type")]
    #[schemars(extend("const" = "local"))]
    kind: &'static str,
    /// Where the skill is (as `path`).
    project_path: String,
}

/// The skills an agent describes itself with, sorted by name. A skills function that fails
/// is logged and lists none: one agent's broken function must not break the agents list.
pub(crate) async fn skill_summaries(agent: &Agent) -> Vec<SkillSummary> {
    if !agent.has_skills() {
        return Vec::new();
    }
    match agent.skills(&RequestContext::new()).await {
        Ok(skills) => skills.iter().map(SkillSummary::of).collect(),
        Err(e) => {
            tracing::warn!(agent = agent.id(), error = %e, "the agent's skills could not be listed");
            Vec::new()
        }
    }
}

async fn get_skill(
    AgentAccess {
        agent,
        id: agent_id,
    }: AgentAccess,
    Path((_, skill_name)): Path<(String, String)>,
) -> Result<Json<SkillDetail>, ApiError> {
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
    let SkillFiles {
        references,
        scripts,
        assets,
    } = skill.files().await.map_err(|e| ApiError::internal(&e))?;
    Ok(Json(SkillDetail {
        summary: SkillSummary::of(skill),
        instructions: skill.instructions().to_owned(),
        source: SkillSource {
            kind: "local",
            project_path: skill.path(),
        },
        references,
        scripts,
        assets,
    }))
}
