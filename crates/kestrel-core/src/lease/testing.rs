//! The conformance suite every [`LeaseProvider`] must pass.
//!
//! A provider's tests call [`run_all`] with a function that makes a fresh provider (its own
//! key prefix, say):
//!
//! ```
//! # async fn demo() {
//! use std::sync::Arc;
//! use kestrel_core::lease::{InProcessLeases, LeaseProvider, testing};
//!
//! testing::run_all(|| async { Arc::new(InProcessLeases::new()) as Arc<dyn LeaseProvider> }).await;
//! # }
//! ```

// Test support: a failed check panics, as an assertion does.
#![allow(clippy::panic)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{Lease, LeaseProvider};

/// The time-to-live of the checks' short leases.
pub const SHORT_TTL: Duration = Duration::from_millis(300);

/// A time-to-live no check outlives.
pub const LONG_TTL: Duration = Duration::from_secs(30);

type Provider = Arc<dyn LeaseProvider>;

/// One check: its name, and the check run on a fresh provider.
pub type Check = (&'static str, fn(Provider) -> BoxFuture<'static, ()>);

/// Every check of the suite.
pub const CHECKS: &[Check] = &[
    ("a_lease_is_exclusive", |p| {
        Box::pin(a_lease_is_exclusive(p))
    }),
    ("tokens_only_grow", |p| Box::pin(tokens_only_grow(p))),
    ("tokens_keep_up_with_the_clock", |p| {
        Box::pin(tokens_keep_up_with_the_clock(p))
    }),
    (
        "a_lease_that_ran_out_can_be_taken_and_its_holder_cannot_act",
        |p| {
            Box::pin(a_lease_that_ran_out_can_be_taken_and_its_holder_cannot_act(
                p,
            ))
        },
    ),
    ("renewing_keeps_a_lease", |p| {
        Box::pin(renewing_keeps_a_lease(p))
    }),
    ("a_released_lease_is_free", |p| {
        Box::pin(a_released_lease_is_free(p))
    }),
    ("a_transferred_lease_has_a_new_holder_and_token", |p| {
        Box::pin(a_transferred_lease_has_a_new_holder_and_token(p))
    }),
    ("racing_acquirers_get_one_lease", |p| {
        Box::pin(racing_acquirers_get_one_lease(p))
    }),
    ("bad_requests_are_refused", |p| {
        Box::pin(bad_requests_are_refused(p))
    }),
];

/// Runs every check of [`CHECKS`], each on a provider `fresh` makes.
pub async fn run_all<F, Fut>(fresh: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Provider>,
{
    for (name, check) in CHECKS {
        tracing::info!(check = name, "lease conformance");
        check(fresh().await).await;
    }
}

async fn acquire(
    p: &dyn LeaseProvider,
    key: &str,
    holder: &str,
    ttl: Duration,
    check: &str,
) -> Option<Lease> {
    match p.acquire(key, holder, ttl).await {
        Ok(lease) => lease,
        Err(error) => panic!("{check}: acquiring {key:?} for {holder:?} failed: {error}"),
    }
}

async fn must_acquire(
    p: &dyn LeaseProvider,
    key: &str,
    holder: &str,
    ttl: Duration,
    check: &str,
) -> Lease {
    match acquire(p, key, holder, ttl, check).await {
        Some(lease) => lease,
        None => panic!("{check}: {key:?} should have been free for {holder:?}"),
    }
}

async fn holder_of(p: &dyn LeaseProvider, key: &str, check: &str) -> Option<Lease> {
    match p.holder(key).await {
        Ok(lease) => lease,
        Err(error) => panic!("{check}: reading {key:?}'s holder failed: {error}"),
    }
}

fn ok<T, E: std::fmt::Display>(result: Result<T, E>, what: &str, check: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{check}: {what} failed: {error}"),
    }
}

/// While a lease is held, nobody else gets it, and `holder` names its holder.
pub async fn a_lease_is_exclusive(p: Provider) {
    const CHECK: &str = "a_lease_is_exclusive";
    let a = must_acquire(&*p, "run:1", "instance-a", LONG_TTL, CHECK).await;
    assert_eq!(
        (a.key.as_str(), a.holder.as_str()),
        ("run:1", "instance-a"),
        "{CHECK}"
    );
    assert_eq!(
        acquire(&*p, "run:1", "instance-b", LONG_TTL, CHECK).await,
        None,
        "{CHECK}"
    );
    assert_eq!(holder_of(&*p, "run:1", CHECK).await, Some(a), "{CHECK}");
    // Another key is another lease.
    must_acquire(&*p, "run:2", "instance-b", LONG_TTL, CHECK).await;
    assert_eq!(holder_of(&*p, "run:none", CHECK).await, None, "{CHECK}");
}

/// Tokens are not below the clock in microseconds (give or take a minute of skew between
/// this process and the backend), so they keep growing after the backend loses its counter.
pub async fn tokens_keep_up_with_the_clock(p: Provider) {
    const CHECK: &str = "tokens_keep_up_with_the_clock";
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let lease = must_acquire(&*p, "run:clock", "instance-a", LONG_TTL, CHECK).await;
    assert!(
        lease.token >= now.saturating_sub(60_000_000),
        "{CHECK}: token {} is far below the clock, {now} µs",
        lease.token
    );
    let next = must_acquire(&*p, "run:clock", "instance-a", LONG_TTL, CHECK).await;
    assert!(next.token > lease.token, "{CHECK}");
}

/// Every lease granted has a greater token than every one before it.
pub async fn tokens_only_grow(p: Provider) {
    const CHECK: &str = "tokens_only_grow";
    let mut last = 0;
    for round in 0..5 {
        let key = if round % 2 == 0 { "run:a" } else { "run:b" };
        let lease = must_acquire(&*p, key, "instance-a", LONG_TTL, CHECK).await;
        assert!(
            lease.token > last,
            "{CHECK}: token {} after {last}",
            lease.token
        );
        last = lease.token;
        assert!(ok(p.release(&lease).await, "release", CHECK), "{CHECK}");
    }
    let again = must_acquire(&*p, "run:a", "instance-a", LONG_TTL, CHECK).await;
    let reacquired = must_acquire(&*p, "run:a", "instance-a", LONG_TTL, CHECK).await;
    assert!(
        reacquired.token > again.token,
        "{CHECK}: a holder's re-acquisition is a new lease"
    );
    assert!(
        !ok(p.renew(&again, LONG_TTL).await, "renew", CHECK),
        "{CHECK}: the older lease of the same holder is stale"
    );
}

/// A lease not renewed runs out: another holder takes it with a greater token, and the old
/// holder can neither renew, release nor hand over what is no longer its own.
pub async fn a_lease_that_ran_out_can_be_taken_and_its_holder_cannot_act(p: Provider) {
    const CHECK: &str = "a_lease_that_ran_out_can_be_taken_and_its_holder_cannot_act";
    let old = must_acquire(&*p, "run:expire", "instance-a", SHORT_TTL, CHECK).await;
    tokio::time::sleep(SHORT_TTL * 2).await;
    assert_eq!(
        holder_of(&*p, "run:expire", CHECK).await,
        None,
        "{CHECK}: it ran out"
    );
    let new = must_acquire(&*p, "run:expire", "instance-b", LONG_TTL, CHECK).await;
    assert!(
        new.token > old.token,
        "{CHECK}: the new owner's token is greater"
    );
    assert!(
        !ok(p.renew(&old, LONG_TTL).await, "renew", CHECK),
        "{CHECK}: renew"
    );
    assert!(
        !ok(p.release(&old).await, "release", CHECK),
        "{CHECK}: release"
    );
    let handed = ok(
        p.transfer(&old, "instance-c", LONG_TTL).await,
        "transfer",
        CHECK,
    );
    assert_eq!(handed, None, "{CHECK}: transfer");
    assert_eq!(
        holder_of(&*p, "run:expire", CHECK).await,
        Some(new),
        "{CHECK}: B keeps it"
    );
}

/// Renewed before it runs out, a lease stays held past its first time-to-live.
pub async fn renewing_keeps_a_lease(p: Provider) {
    const CHECK: &str = "renewing_keeps_a_lease";
    let lease = must_acquire(&*p, "run:renew", "instance-a", SHORT_TTL, CHECK).await;
    for _ in 0..4 {
        tokio::time::sleep(SHORT_TTL / 3).await;
        assert!(
            ok(p.renew(&lease, SHORT_TTL).await, "renew", CHECK),
            "{CHECK}"
        );
    }
    assert_eq!(
        acquire(&*p, "run:renew", "instance-b", LONG_TTL, CHECK).await,
        None,
        "{CHECK}"
    );
    assert_eq!(
        holder_of(&*p, "run:renew", CHECK).await,
        Some(lease),
        "{CHECK}"
    );
}

/// A released lease is free at once, for anyone; releasing twice reports it was gone.
pub async fn a_released_lease_is_free(p: Provider) {
    const CHECK: &str = "a_released_lease_is_free";
    let lease = must_acquire(&*p, "run:release", "instance-a", LONG_TTL, CHECK).await;
    assert!(ok(p.release(&lease).await, "release", CHECK), "{CHECK}");
    assert!(
        !ok(p.release(&lease).await, "release", CHECK),
        "{CHECK}: twice"
    );
    let next = must_acquire(&*p, "run:release", "instance-b", LONG_TTL, CHECK).await;
    assert!(next.token > lease.token, "{CHECK}");
}

/// A lease handed over belongs to its new holder, with a greater token; the old lease is
/// stale.
pub async fn a_transferred_lease_has_a_new_holder_and_token(p: Provider) {
    const CHECK: &str = "a_transferred_lease_has_a_new_holder_and_token";
    let a = must_acquire(&*p, "run:transfer", "instance-a", LONG_TTL, CHECK).await;
    let Some(b) = ok(
        p.transfer(&a, "instance-b", LONG_TTL).await,
        "transfer",
        CHECK,
    ) else {
        panic!("{CHECK}: a held lease can be handed over");
    };
    assert_eq!(b.holder, "instance-b", "{CHECK}");
    assert!(b.token > a.token, "{CHECK}");
    assert!(
        !ok(p.renew(&a, LONG_TTL).await, "renew", CHECK),
        "{CHECK}: A's lease is stale"
    );
    assert!(
        ok(p.renew(&b, LONG_TTL).await, "renew", CHECK),
        "{CHECK}: B's is live"
    );
    assert_eq!(
        holder_of(&*p, "run:transfer", CHECK).await,
        Some(b),
        "{CHECK}"
    );
}

/// Many holders race for one free key: exactly one gets it.
pub async fn racing_acquirers_get_one_lease(p: Provider) {
    const CHECK: &str = "racing_acquirers_get_one_lease";
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let p = Arc::clone(&p);
            tokio::spawn(async move {
                acquire(&*p, "run:race", &format!("instance-{n}"), LONG_TTL, CHECK).await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        if let Some(lease) = ok(task.await, "an acquirer", CHECK) {
            winners.push(lease);
        }
    }
    assert_eq!(winners.len(), 1, "{CHECK}: winners {winners:?}");
    assert_eq!(
        holder_of(&*p, "run:race", CHECK).await,
        winners.pop(),
        "{CHECK}"
    );
}

/// Empty or overlong names and time-to-lives out of range are refused with an error.
pub async fn bad_requests_are_refused(p: Provider) {
    const CHECK: &str = "bad_requests_are_refused";
    let long = "k".repeat(super::MAX_NAME_LEN + 1);
    for (key, holder, ttl) in [
        ("", "h", LONG_TTL),
        ("k", "", LONG_TTL),
        (long.as_str(), "h", LONG_TTL),
        ("k", "h", Duration::ZERO),
        ("k", "h", Duration::from_secs(25 * 3600)),
    ] {
        assert!(
            p.acquire(key, holder, ttl).await.is_err(),
            "{CHECK}: key {} bytes, holder {holder:?}, ttl {ttl:?}",
            key.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::InProcessLeases;

    #[tokio::test]
    async fn in_process_leases_pass_the_suite() {
        run_all(|| async { Arc::new(InProcessLeases::new()) as Provider }).await;
    }
}
