//! A Redis that restarts under a subscription: the subscription reconnects and delivers what
//! was published before and after, nothing twice and nothing skipped.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel_core::event::Event;
use kestrel_core::pubsub::PubSub;
use kestrel_redis::{RedisPubSub, RedisPubSubOptions};

use crate::{delta, fresh_prefix, redis_url};

/// A `redis-server` of this test's own, with an append-only file synced on every write so a
/// `kill -9` loses nothing it acknowledged.
struct OwnRedis {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl OwnRedis {
    fn start(port: u16, dir: &std::path::Path) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (it is installed where Redis is)");
        let own = Self {
            child,
            port,
            dir: dir.to_owned(),
        };
        own.wait_until_up();
        own
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_until_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not come up on port {}", self.port);
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self) {
        self.kill();
        *self = Self::start(self.port, &self.dir.clone());
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Publishes, retrying while the publisher reconnects (a restart refuses a few attempts).
async fn publish_retrying(pubsub: &RedisPubSub, topic: &str, event: Event) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match pubsub.publish(topic, event.clone()).await {
            Ok(()) => return,
            Err(error) if Instant::now() < deadline => {
                eprintln!("publish failed while Redis restarts (retrying): {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("publishing never recovered: {error}"),
        }
    }
}

#[tokio::test]
async fn a_subscription_survives_a_redis_restart() {
    // Runs where the shared Redis runs (CI), which is where `redis-server` is installed.
    if redis_url("a_subscription_survives_a_redis_restart").is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("kestrel-redis-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut redis = OwnRedis::start(free_port(), &dir);
    let options = RedisPubSubOptions {
        max_retry_delay: Duration::from_millis(200),
        block: Duration::from_millis(500),
        ..RedisPubSubOptions::default().key_prefix(fresh_prefix())
    };
    let publisher = RedisPubSub::connect(&redis.url(), options.clone())
        .await
        .unwrap();
    let subscriber = RedisPubSub::connect(&redis.url(), options).await.unwrap();
    let mut subscription = subscriber.subscribe("thread:restart").await.unwrap();

    for n in 0..5 {
        publisher.publish("thread:restart", delta(n)).await.unwrap();
    }
    let before: Vec<Event> = (&mut subscription).take(5).collect().await;
    assert_eq!(before, (0..5).map(delta).collect::<Vec<_>>());

    // Published, then Redis dies before the subscriber has read them.
    for n in 5..8 {
        publisher.publish("thread:restart", delta(n)).await.unwrap();
    }
    redis.restart();
    for n in 8..12 {
        publish_retrying(&publisher, "thread:restart", delta(n)).await;
    }
    let after = tokio::time::timeout(
        Duration::from_secs(20),
        (&mut subscription).take(7).collect::<Vec<Event>>(),
    )
    .await
    .expect("the subscription delivers again after the restart");
    assert_eq!(after, (5..12).map(delta).collect::<Vec<_>>());
    let extra = tokio::time::timeout(Duration::from_millis(500), subscription.next()).await;
    assert!(extra.is_err(), "nothing is delivered twice: {extra:?}");
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}
