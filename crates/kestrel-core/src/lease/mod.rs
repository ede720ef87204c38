//! Leases with fencing tokens: who owns a thread or a run, across processes.
//!
//! An instance that drives a run holds the run's lease for a short time-to-live and renews it
//! while it works. If it stops renewing (it died, or was paused past its lease) another
//! instance may take the lease over. Each lease carries a **token** that only grows, across
//! every lease a provider grants: a later owner always holds a greater token than an earlier
//! one, so a store that remembers the greatest token it has seen for a run can refuse the
//! writes of an owner that lost its lease without knowing it ("fencing").
//!
//! [`InProcessLeases`] is the default, for one process; `kestrel_redis::RedisLeases` shares
//! leases between the instances connected to one Redis. Both pass the suite of `lease::testing`
//! (feature `testing`).
//!
//! (Within one process, runs of one thread also take turns through the runtime's thread
//! queue; a lease is what makes that turn hold across processes.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::BoxError;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// The longest key or holder name a provider accepts, in bytes.
pub const MAX_NAME_LEN: usize = 512;

/// A lease on a key, as its holder has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// What is leased (`run:<id>`, `thread:<resource>:<thread>`...).
    pub key: String,
    /// Who holds it (an instance's id).
    pub holder: String,
    /// Greater than the token of every lease granted before it, by the same provider.
    pub token: u64,
}

/// What a run's write carries so that a store can refuse it once the run has a newer owner:
/// the run, and the token of the lease its writer holds. A store keeps, per run, the greatest
/// token it has seen and refuses a write with a smaller one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence<'a> {
    /// The run whose write this is.
    pub run_id: &'a str,
    /// The writer's lease token.
    pub token: u64,
}

/// Why a lease operation failed (not: the lease is taken or lost, which are answers).
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// A key, a holder or a time-to-live the provider cannot take.
    #[error("invalid lease {what}: {reason}")]
    Invalid {
        /// What was wrong (`key`, `holder`, `ttl`).
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The backend failed (unreachable, refused).
    #[error("the lease backend failed on {key:?}: {source}")]
    Backend {
        /// The key.
        key: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The provider's token counter is at the largest token it can grant (or holds something
    /// that is not a token): no lease can be granted. Tokens only grow, and every store
    /// remembers the greatest it saw, so the counter cannot simply be reset; it takes an
    /// operator (a new key prefix, with the stores' fences cleared).
    #[error(
        "no lease can be granted: the lease token counter {counter:?} holds {value:?}, at or over the largest token ({limit}); it takes an operator to reset it (see docs/scaling.md)"
    )]
    TokensExhausted {
        /// The counter's key.
        counter: String,
        /// What it holds.
        value: String,
        /// The largest token the provider grants.
        limit: u64,
    },
}

/// Grants, renews, hands over and releases leases.
#[async_trait::async_trait]
pub trait LeaseProvider: Send + Sync + std::fmt::Debug {
    /// Takes `key` for `holder` for `ttl`, if nobody holds it (or its lease ran out):
    /// `None` when someone else holds it. A holder that already holds it gets a new lease
    /// (a greater token) as well.
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError>;

    /// Extends `lease` to `ttl` from now, if it is still held: `false` when it was lost
    /// (it ran out and was taken, or released).
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, LeaseError>;

    /// Gives `lease` up, if it is still held: `false` when it was already lost.
    async fn release(&self, lease: &Lease) -> Result<bool, LeaseError>;

    /// Hands `lease` to `to` for `ttl`, with a new token, if it is still held.
    async fn transfer(
        &self,
        lease: &Lease,
        to: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError>;

    /// The lease on `key` now, if someone holds it.
    async fn holder(&self, key: &str) -> Result<Option<Lease>, LeaseError>;
}

/// The longest lease key (and holder) kept as it is; a longer one is shortened by
/// [`bounded_key`].
pub const MAX_PLAIN_KEY_LEN: usize = 256;

/// `key` as a lease key within every provider's limit: a key of at most
/// [`MAX_PLAIN_KEY_LEN`] bytes as it is, a longer one (ids a caller chose may each be up to a
/// kilobyte) as its kind (the text before the first `:`) and the SHA-256 of the whole key:
/// `run:~sha256:<hex>`. Distinct keys stay distinct (barring a SHA-256 collision), and every
/// instance derives the same key from the same ids.
pub fn bounded_key(key: String) -> String {
    if key.len() <= MAX_PLAIN_KEY_LEN {
        return key;
    }
    let kind = key.split_once(':').map_or("key", |(kind, _)| kind);
    let kind = if kind.len() > 64 { "key" } else { kind };
    format!("{kind}:~sha256:{}", sha256_hex(key.as_bytes()))
}

/// The lowercase hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    let digest = sha2::Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Checks a key, a holder and a time-to-live (for every provider).
pub fn check_lease_request(key: &str, holder: &str, ttl: Duration) -> Result<(), LeaseError> {
    let invalid = |what, reason: &str| LeaseError::Invalid {
        what,
        reason: reason.to_owned(),
    };
    if key.is_empty() || key.len() > MAX_NAME_LEN {
        return Err(invalid("key", "must have 1 to 512 bytes"));
    }
    if holder.is_empty() || holder.len() > MAX_NAME_LEN {
        return Err(invalid("holder", "must have 1 to 512 bytes"));
    }
    if ttl < Duration::from_millis(1) || ttl > Duration::from_secs(24 * 3600) {
        return Err(invalid("ttl", "must be between 1 ms and 24 h"));
    }
    Ok(())
}

/// Leases within this process (the default).
#[derive(Debug, Default)]
pub struct InProcessLeases {
    held: Mutex<HashMap<String, (Lease, Instant)>>,
    last_token: AtomicU64,
}

impl InProcessLeases {
    /// No lease held.
    pub fn new() -> Self {
        Self::default()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Lease, Instant)>> {
        // Plain data behind the lock: a panic elsewhere leaves it consistent.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A token above every one granted before, and not below the clock in microseconds, so
    /// that tokens keep growing across restarts of the process.
    fn grant(&self, key: &str, holder: &str) -> Lease {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let previous = self
            .last_token
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some((last + 1).max(now))
            })
            .unwrap_or_else(|last| last);
        Lease {
            key: key.to_owned(),
            holder: holder.to_owned(),
            token: (previous + 1).max(now),
        }
    }
}

#[async_trait::async_trait]
impl LeaseProvider for InProcessLeases {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_lease_request(key, holder, ttl)?;
        let mut held = self.held();
        let now = Instant::now();
        if held.len() >= 1024 && held.len().is_power_of_two() {
            // Leases that ran out and were never taken again hold nothing.
            held.retain(|_, (_, until)| *until > now);
        }
        if let Some((lease, until)) = held.get(key)
            && *until > now
            && lease.holder != holder
        {
            return Ok(None);
        }
        let lease = self.grant(key, holder);
        held.insert(key.to_owned(), (lease.clone(), now + ttl));
        Ok(Some(lease))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, LeaseError> {
        check_lease_request(&lease.key, &lease.holder, ttl)?;
        let mut held = self.held();
        let now = Instant::now();
        match held.get_mut(&lease.key) {
            Some((current, until)) if current == lease && *until > now => {
                *until = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LeaseError> {
        let mut held = self.held();
        match held.get(&lease.key) {
            Some((current, until)) if current == lease => {
                let live = *until > Instant::now();
                held.remove(&lease.key);
                Ok(live)
            }
            _ => Ok(false),
        }
    }

    async fn transfer(
        &self,
        lease: &Lease,
        to: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_lease_request(&lease.key, to, ttl)?;
        let mut held = self.held();
        let now = Instant::now();
        match held.get(&lease.key) {
            Some((current, until)) if current == lease && *until > now => {
                let next = self.grant(&lease.key, to);
                held.insert(lease.key.clone(), (next.clone(), now + ttl));
                Ok(Some(next))
            }
            _ => Ok(None),
        }
    }

    async fn holder(&self, key: &str) -> Result<Option<Lease>, LeaseError> {
        let held = self.held();
        Ok(held
            .get(key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(lease, _)| lease.clone()))
    }
}
