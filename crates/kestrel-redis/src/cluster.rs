//! [`RedisCluster`]: everything several instances share on one Redis, from one URL.

use std::sync::Arc;

use kestrel_core::cluster::Cluster;
use kestrel_core::pubsub::SharedPubSub;

use crate::conn::RedisError;
use crate::lease::RedisLeases;
use crate::pubsub::{RedisPubSub, RedisPubSubOptions};

/// The pub/sub (thread events, and the instances' inboxes) and the leases of a cluster of
/// instances on one Redis, under one key prefix.
///
/// ```no_run
/// # async fn demo(agent: kestrel_core::agent::Agent) -> Result<(), Box<dyn std::error::Error>> {
/// use kestrel_core::kestrel::Kestrel;
/// use kestrel_redis::RedisCluster;
///
/// let redis = RedisCluster::connect("redis://127.0.0.1:6379").await?;
/// let kestrel = Kestrel::builder()
///     .agent(agent)
///     .pubsub(redis.pubsub())
///     .cluster(redis.cluster())
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedisCluster {
    pubsub: RedisPubSub,
    leases: RedisLeases,
}

impl RedisCluster {
    /// Connects to the Redis at `url` with the default options (key prefix `kestrel:`).
    pub async fn connect(url: &str) -> Result<Self, RedisError> {
        Self::connect_with(url, RedisPubSubOptions::default()).await
    }

    /// Connects with `options`; the leases live under the same key prefix.
    pub async fn connect_with(url: &str, options: RedisPubSubOptions) -> Result<Self, RedisError> {
        let prefix = options.key_prefix.clone();
        let timeouts = options.timeouts();
        let pubsub = RedisPubSub::connect(url, options).await?;
        let leases = RedisLeases::connect_with(url, prefix, timeouts).await?;
        Ok(Self { pubsub, leases })
    }

    /// The pub/sub, for [`kestrel_core::kestrel::KestrelBuilder::pubsub`].
    pub fn pubsub(&self) -> SharedPubSub {
        Arc::new(self.pubsub.clone())
    }

    /// The leases (a [`kestrel_core::lease::LeaseProvider`]), for tools and tests that take
    /// or inspect leases themselves.
    pub fn leases(&self) -> RedisLeases {
        self.leases.clone()
    }

    /// A cluster membership on these leases and inboxes, as a new instance with a random id
    /// (set [`Cluster::instance_id`] and [`Cluster::lease_ttl`] on it as needed), for
    /// [`kestrel_core::kestrel::KestrelBuilder::cluster`].
    pub fn cluster(&self) -> Cluster {
        Cluster::new(Arc::new(self.leases.clone()), Arc::new(self.pubsub.clone()))
    }
}
