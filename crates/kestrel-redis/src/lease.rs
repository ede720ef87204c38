//! [`RedisLeases`]: leases with fencing tokens on Redis, shared by every instance connected to
//! it.
//!
//! A lease is a key holding `<token>:<holder>` with a time-to-live (`SET … PX`); its token comes
//! from one counter per key prefix (`INCR`), which never expires, so tokens only grow across
//! every lease of the prefix. The counter never falls behind Redis's clock in microseconds
//! either: should Redis lose its data (a restart without persistence), new tokens still exceed
//! every token granted before, which the stores remember. Acquire, renew, release and transfer are each one Lua script,
//! atomic in Redis: a renewal or a release with a stale lease changes nothing. The lease key
//! and the counter must live on one Redis (not a cluster: the scripts touch both keys).

use std::time::Duration;

use kestrel_core::lease::{Lease, LeaseError, LeaseProvider, check_lease_request};
use redis::Script;

use crate::conn::{RedisError, Shared, Timeouts, redacted};

/// The Lua that takes the next token (into `token`) from the counter `KEYS[2]`: one above the
/// last, and not below Redis's clock in microseconds. A counter at the largest integer Lua's
/// numbers hold exactly (2^53 - 1), or holding something else than a number, is refused with
/// a `KESTREL_TOKENS_EXHAUSTED` error (a token past it could repeat or go back).
macro_rules! next_token {
    () => {
        r"
local last = redis.call('GET', KEYS[2])
if last and (not tonumber(last) or tonumber(last) >= 9007199254740991) then
  return redis.error_reply('KESTREL_TOKENS_EXHAUSTED ' .. string.sub(last, 1, 64))
end
local token = redis.call('INCR', KEYS[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
if token < now then
  token = now
  redis.call('SET', KEYS[2], string.format('%d', token))
end
"
    };
}

/// The largest token granted (2^53 - 1: Lua's numbers hold integers exactly up to it).
const MAX_TOKEN: u64 = (1 << 53) - 1;

const ACQUIRE: &str = concat!(
    r"
local current = redis.call('GET', KEYS[1])
if current then
  local sep = string.find(current, ':', 1, true)
  if string.sub(current, sep + 1) ~= ARGV[1] then return false end
end
",
    next_token!(),
    r"redis.call('SET', KEYS[1], string.format('%d', token) .. ':' .. ARGV[1], 'PX', ARGV[2])
return token
"
);

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
";

const TRANSFER: &str = concat!(
    r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
",
    next_token!(),
    r"redis.call('SET', KEYS[1], string.format('%d', token) .. ':' .. ARGV[2], 'PX', ARGV[3])
return token
"
);

/// A [`LeaseProvider`] on Redis.
#[derive(Clone)]
pub struct RedisLeases {
    connection: Shared,
    prefix: String,
    url: String,
    acquire: Script,
    renew: Script,
    release: Script,
    transfer: Script,
}

impl std::fmt::Debug for RedisLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLeases")
            .field("url", &redacted(&self.url))
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisLeases {
    /// Connects to the Redis at `url`; every key it writes starts with `prefix` (`kestrel:`
    /// for an application's own, a fresh one per test).
    pub async fn connect(url: &str, prefix: impl Into<String>) -> Result<Self, RedisError> {
        Self::connect_with(url, prefix, Timeouts::default()).await
    }

    /// [`RedisLeases::connect`] with these timeouts (a [`crate::RedisCluster`]'s options').
    pub(crate) async fn connect_with(
        url: &str,
        prefix: impl Into<String>,
        timeouts: Timeouts,
    ) -> Result<Self, RedisError> {
        let (_, connection) = crate::conn::connect(url, timeouts).await?;
        Ok(Self {
            connection,
            prefix: prefix.into(),
            url: url.to_owned(),
            acquire: Script::new(ACQUIRE),
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
            transfer: Script::new(TRANSFER),
        })
    }

    fn lease_key(&self, key: &str) -> String {
        format!("{}lease:{key}", self.prefix)
    }

    fn counter_key(&self) -> String {
        format!("{}lease-token", self.prefix)
    }

    /// Runs a script on the shared connection, again when the connection broke under it.
    async fn invoke<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        self.connection
            .run(|mut connection| async move { invocation.invoke_async(&mut connection).await })
            .await
    }

    fn backend(&self, key: &str, source: redis::RedisError) -> LeaseError {
        if source.code() == Some("KESTREL_TOKENS_EXHAUSTED") {
            return LeaseError::TokensExhausted {
                counter: self.counter_key(),
                value: source.detail().unwrap_or_default().to_owned(),
                limit: MAX_TOKEN,
            };
        }
        LeaseError::Backend {
            key: key.to_owned(),
            source: source.into(),
        }
    }
}

fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// The stored value of `lease`.
fn value(lease: &Lease) -> String {
    format!("{}:{}", lease.token, lease.holder)
}

#[async_trait::async_trait]
impl LeaseProvider for RedisLeases {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_lease_request(key, holder, ttl)?;
        let mut invocation = self.acquire.key(self.lease_key(key));
        invocation
            .key(self.counter_key())
            .arg(holder)
            .arg(ttl_ms(ttl));
        let token: Option<u64> = self
            .invoke(&invocation)
            .await
            .map_err(|e| self.backend(key, e))?;
        Ok(token.map(|token| Lease {
            key: key.to_owned(),
            holder: holder.to_owned(),
            token,
        }))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, LeaseError> {
        check_lease_request(&lease.key, &lease.holder, ttl)?;
        let mut invocation = self.renew.key(self.lease_key(&lease.key));
        invocation.arg(value(lease)).arg(ttl_ms(ttl));
        let renewed: i64 = self
            .invoke(&invocation)
            .await
            .map_err(|e| self.backend(&lease.key, e))?;
        Ok(renewed == 1)
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LeaseError> {
        let mut invocation = self.release.key(self.lease_key(&lease.key));
        invocation.arg(value(lease));
        let released: i64 = self
            .invoke(&invocation)
            .await
            .map_err(|e| self.backend(&lease.key, e))?;
        Ok(released == 1)
    }

    async fn transfer(
        &self,
        lease: &Lease,
        to: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_lease_request(&lease.key, to, ttl)?;
        let mut invocation = self.transfer.key(self.lease_key(&lease.key));
        invocation
            .key(self.counter_key())
            .arg(value(lease))
            .arg(to)
            .arg(ttl_ms(ttl));
        let token: Option<u64> = self
            .invoke(&invocation)
            .await
            .map_err(|e| self.backend(&lease.key, e))?;
        Ok(token.map(|token| Lease {
            key: lease.key.clone(),
            holder: to.to_owned(),
            token,
        }))
    }

    async fn holder(&self, key: &str) -> Result<Option<Lease>, LeaseError> {
        let lease_key = self.lease_key(key);
        let stored: Option<String> = self
            .connection
            .run(|mut connection| {
                let lease_key = &lease_key;
                async move {
                    redis::cmd("GET")
                        .arg(lease_key)
                        .query_async(&mut connection)
                        .await
                }
            })
            .await
            .map_err(|e| self.backend(key, e))?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        let parsed = stored
            .split_once(':')
            .and_then(|(token, holder)| Some((token.parse::<u64>().ok()?, holder)));
        match parsed {
            Some((token, holder)) => Ok(Some(Lease {
                key: key.to_owned(),
                holder: holder.to_owned(),
                token,
            })),
            None => Err(LeaseError::Backend {
                key: key.to_owned(),
                source: format!("the lease key holds {stored:?}, not a Kestrel lease").into(),
            }),
        }
    }
}
