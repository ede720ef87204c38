//! The instances of the chaos run, each behind fault proxies of its own, and the faults done
//! to them.

use super::*;

/// One instance: its proxies, kept across its restarts, and its process while it runs.
pub(super) struct Node {
    pub(super) id: &'static str,
    pub(super) postgres: FaultProxy,
    pub(super) redis: FaultProxy,
    pub(super) process: Option<Instance>,
    pub(super) starts: usize,
}

impl Node {
    pub(super) async fn new(id: &'static str, services: &Services) -> Self {
        let proxy = |url: &str| {
            let authority = url
                .split("://")
                .nth(1)
                .and_then(|rest| rest.split(['/', '?']).next())
                .map(|a| a.rsplit('@').next().unwrap_or(a).to_owned())
                .unwrap();
            async move {
                let upstream = kestrel_chaos::resolve(&authority).await.unwrap();
                FaultProxy::start(upstream).await.unwrap()
            }
        };
        Self {
            id,
            postgres: proxy(&services.postgres).await,
            redis: proxy(&services.redis).await,
            process: None,
            starts: 0,
        }
    }

    /// Starts `kestrel dev` through the node's proxies, recording into a ledger file of its
    /// own under `ledgers`; returns its base URL.
    pub(super) async fn start(
        &mut self,
        services: &Services,
        model: &FakeServer,
        ledgers: &Path,
    ) -> String {
        self.starts += 1;
        let db = self.postgres.url_for(&services.postgres).unwrap();
        let redis = self.redis.url_for(&services.redis).unwrap();
        let prefix = format!("{}:", services.schema);
        let ledger = ledgers.join(format!("{}-{}.log", self.id, self.starts));
        let args = [
            "--db",
            &db,
            "--schema",
            &services.schema,
            "--redis",
            &redis,
            "--redis-prefix",
            &prefix,
            "--instance-id",
            self.id,
            "--lease-ttl-ms",
            LEASE_TTL_MS,
            "--tool-delay-ms",
            TOOL_DELAY_MS,
        ];
        let vars = [(kestrel_cli::dev::LEDGER_ENV, ledger.as_os_str())];
        let instance = Instance::launch_env(model, &args, &vars).await;
        let base = instance.base.clone();
        self.process = Some(instance);
        base
    }

    pub(super) fn process(&self) -> &Instance {
        self.process.as_ref().unwrap()
    }
}

/// Whether instance `i` serves a new run (a lease in Redis, a thread in PostgreSQL) within
/// two minutes of a fault being lifted: a fresh thread and run id per try.
pub(super) async fn survives(live: Live, i: usize, fault: usize) -> bool {
    let client = http(Duration::from_secs(15));
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut attempt = 0;
    while Instant::now() < deadline {
        attempt += 1;
        if let Some(base) = live.of(i) {
            let thread = format!("probe-{fault}-{attempt}");
            let body = json!({"messages": "hi", "runId": thread,
                "memory": {"thread": thread, "resource": RESOURCE}});
            let post = client
                .post(format!("{base}/api/agents/assistant/generate"))
                .json(&body);
            if let Some((200, answer)) = answer(post).await
                && answer.to_string().contains("Hello there")
            {
                return true;
            }
        }
        pause(1000).await;
    }
    false
}
