//! An agent's skills: a set with one skill per name, fixed or chosen per run.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Skill, SkillError};
use crate::context::RequestContext;
use crate::error::BoxError;

/// Skills by name, sorted; no two share a name.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    skills: BTreeMap<String, Skill>,
}

impl SkillSet {
    /// A set of these skills; two with one name are refused.
    pub fn new(skills: impl IntoIterator<Item = Skill>) -> Result<Self, SkillError> {
        Self::unique(skills).map_err(|d| SkillError::DuplicateName {
            name: d.name,
            first: d.first,
            second: d.second,
        })
    }

    /// A set of these skills, or the first name two of them share.
    pub(crate) fn unique(skills: impl IntoIterator<Item = Skill>) -> Result<Self, Duplicate> {
        let mut set: BTreeMap<String, Skill> = BTreeMap::new();
        for skill in skills {
            if let Some(first) = set.get(skill.name()) {
                return Err(Duplicate {
                    name: skill.name().to_owned(),
                    first: first.location(),
                    second: skill.location(),
                });
            }
            set.insert(skill.name().to_owned(), skill);
        }
        Ok(Self { skills: set })
    }

    /// The skill of this name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// The skill of this name, or an error listing the names there are.
    pub fn require(&self, name: &str) -> Result<&Skill, SkillError> {
        self.get(name).ok_or_else(|| SkillError::UnknownSkill {
            name: name.to_owned(),
            available: self.names(),
        })
    }

    /// The skills, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.skills.keys().cloned().collect()
    }

    /// How many skills there are.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }
}

/// Two skills with one name: the name, and where each is.
pub(crate) struct Duplicate {
    pub(crate) name: String,
    pub(crate) first: String,
    pub(crate) second: String,
}

pub(crate) type DynSkills =
    dyn Fn(RequestContext) -> BoxFuture<'static, Result<Vec<Skill>, BoxError>> + Send + Sync;

/// Where an agent's skills come from: fixed when it was built, or a function of the request
/// context called once per run (and once per skill tool call).
#[derive(Clone)]
pub(crate) enum SkillsSource {
    Fixed(Arc<SkillSet>),
    Dynamic(Arc<DynSkills>),
}

impl SkillsSource {
    /// The skills for a run with this request context.
    pub(crate) async fn resolve(&self, ctx: &RequestContext) -> Result<Arc<SkillSet>, SkillError> {
        match self {
            SkillsSource::Fixed(set) => Ok(Arc::clone(set)),
            SkillsSource::Dynamic(f) => {
                let skills = f(ctx.clone()).await.map_err(SkillError::Dynamic)?;
                Ok(Arc::new(SkillSet::new(skills)?))
            }
        }
    }
}

impl std::fmt::Debug for SkillsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkillsSource::Fixed(set) => f.debug_tuple("Fixed").field(&set.names()).finish(),
            SkillsSource::Dynamic(_) => f.write_str("Dynamic"),
        }
    }
}
