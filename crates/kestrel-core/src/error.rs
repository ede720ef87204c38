//! The error type every layer can carry: what a user's function (a tool, a hook, a store)
//! fails with.

/// A boxed error from user code (tools, hooks, instructions or model functions, stores).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
