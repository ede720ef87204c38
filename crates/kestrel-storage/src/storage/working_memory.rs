//! Working memory: one text per thread or per resource.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::Scope;

/// Working memory: one text per thread or per resource.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait WorkingMemoryStore: Send + Sync {
    /// The working memory of a thread (owner checked) or a resource.
    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>>;

    /// Sets the working memory (markdown or JSON text) of a thread or a resource.
    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()>;
}
