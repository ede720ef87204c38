//! Cancellation: an [`AbortSignal`] that runs, model calls and tools watch.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// A cloneable cancellation signal, like the web's `AbortSignal`.
///
/// Every clone observes the same state. [`AbortSignal::child`] makes a signal that fires when
/// its parent fires but can also be aborted on its own (used for sub-runs).
#[derive(Debug, Clone, Default)]
pub struct AbortSignal {
    // Shared, not cloned: a token's clone takes a lock, and a run clones its signal into every
    // model request and tool context.
    token: Arc<CancellationToken>,
}

impl AbortSignal {
    /// A signal that has not fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the signal. Idempotent.
    pub fn abort(&self) {
        self.token.cancel();
    }

    /// Whether the signal has fired.
    pub fn is_aborted(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Completes when the signal fires.
    pub async fn aborted(&self) {
        self.token.cancelled().await
    }

    /// A signal that fires with this one, or on its own.
    pub fn child(&self) -> Self {
        Self {
            token: Arc::new(self.token.child_token()),
        }
    }
}
