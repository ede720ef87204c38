//! When a tool call needs a person's approval before it runs.

use std::sync::Arc;

use serde_json::Value;

use super::ApprovalContext;

type Predicate = dyn Fn(&Value, &ApprovalContext<'_>) -> bool + Send + Sync;

/// Whether tool calls need approval: never, always, or as a function of the call's arguments
/// and context. Used on a tool ([`crate::tool::ToolBuilder::require_approval`]) and on a run
/// ([`crate::agent::RunOptions::require_tool_approval`]); a call needs approval when either
/// says so. The answer is taken once, when the model makes the call, and kept with the run.
#[derive(Clone, Default)]
pub enum ApprovalPolicy {
    /// No approval (the default).
    #[default]
    Never,
    /// Every call.
    Always,
    /// The calls for which the function returns `true`.
    When(Arc<Predicate>),
}

impl ApprovalPolicy {
    /// The calls for which `predicate(args, ctx)` returns `true`.
    pub fn when(
        predicate: impl Fn(&Value, &ApprovalContext<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::When(Arc::new(predicate))
    }

    /// Whether a call with these arguments needs approval.
    pub fn requires(&self, args: &Value, ctx: &ApprovalContext<'_>) -> bool {
        match self {
            Self::Never => false,
            Self::Always => true,
            Self::When(predicate) => predicate(args, ctx),
        }
    }
}

impl From<bool> for ApprovalPolicy {
    fn from(required: bool) -> Self {
        if required { Self::Always } else { Self::Never }
    }
}

impl std::fmt::Debug for ApprovalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Never => f.write_str("Never"),
            Self::Always => f.write_str("Always"),
            Self::When(_) => f.write_str("When(<fn>)"),
        }
    }
}
