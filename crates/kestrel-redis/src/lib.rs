//! Redis backends for Kestrel, for several instances of one application on one Redis.
//!
//! [`RedisPubSub`] carries run events between processes on Redis Streams: a subscription on
//! one instance (`agent.thread(..).subscribe()`, the Studio's live view) sees the runs another
//! instance drives. It implements [`kestrel_core::pubsub::PubSub`] and passes the same
//! conformance suite as the in-process default (`kestrel_core::pubsub::testing`, feature
//! `testing`).
//!
//! It is also a [`kestrel_core::cluster::ControlBus`]: each instance's inbox is a stream,
//! through which an abort, a message for a thread's active run or a pause reaches the
//! instance that drives the run, and the answer comes back.
//!
//! [`RedisCluster`] connects both from one URL, for
//! [`KestrelBuilder::pubsub`](kestrel_core::kestrel::KestrelBuilder::pubsub) and
//! [`KestrelBuilder::cluster`](kestrel_core::kestrel::KestrelBuilder::cluster).
//!
//! [`RedisLeases`] grants leases with fencing tokens ([`kestrel_core::lease`]): one owner per
//! run or thread across instances, and a token that only grows so that a store can refuse
//! the writes of an owner that lost its lease.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kestrel_redis::{RedisPubSub, RedisPubSubOptions};
//!
//! let pubsub = RedisPubSub::connect("redis://127.0.0.1:6379", RedisPubSubOptions::default()).await?;
//! let pubsub: kestrel_core::pubsub::SharedPubSub = Arc::new(pubsub);
//! # Ok(()) }
//! ```

mod cluster;
mod conn;
mod inbox;
mod lease;
mod position;
mod pubsub;

pub use cluster::RedisCluster;
pub use conn::RedisError;
pub use lease::RedisLeases;
pub use pubsub::{RedisPubSub, RedisPubSubOptions};
