//! The `kestrel dev` processes, their services, and reading their streams.

use super::*;

pub(crate) struct Services {
    pub(crate) postgres: String,
    pub(crate) redis: String,
    pub(crate) schema: String,
}

impl Services {
    pub(crate) fn from_env(test: &str) -> Option<Self> {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        match (
            var("KESTREL_TEST_POSTGRES_URL"),
            var("KESTREL_TEST_REDIS_URL"),
        ) {
            (Some(postgres), Some(redis)) => Some(Self {
                postgres,
                redis,
                schema: kestrel_storage::testing::test_schema(),
            }),
            _ => {
                eprintln!(
                    "skipping {test}: set KESTREL_TEST_POSTGRES_URL and KESTREL_TEST_REDIS_URL"
                );
                None
            }
        }
    }

    pub(crate) async fn teardown(self) {
        kestrel_storage::testing::drop_schema(&self.postgres, &self.schema).await;
    }
}

/// One `kestrel dev` process.
pub(crate) struct Instance {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
}

impl Instance {
    pub(crate) async fn start(services: &Services, model: &FakeServer, id: &str) -> Self {
        Self::start_with(services, model, id, &[]).await
    }

    /// [`Instance::start`] with more arguments of `kestrel dev`.
    pub(crate) async fn start_with(
        services: &Services,
        model: &FakeServer,
        id: &str,
        more: &[&str],
    ) -> Self {
        let prefix = format!("{}:", services.schema);
        let mut args = vec![
            "--db",
            &services.postgres,
            "--schema",
            &services.schema,
            "--redis",
            &services.redis,
            "--redis-prefix",
            &prefix,
            "--instance-id",
            id,
            "--lease-ttl-ms",
            LEASE_TTL_MS,
        ];
        args.extend_from_slice(more);
        Self::launch(model, &args).await
    }

    /// `kestrel dev --port 0 --model openai/fake` with `args`, on `model`; returns once it
    /// serves.
    pub(crate) async fn launch(model: &FakeServer, args: &[&str]) -> Self {
        Self::launch_env(model, args, &[]).await
    }

    /// [`Instance::launch`] with more environment variables.
    pub(crate) async fn launch_env(
        model: &FakeServer,
        args: &[&str],
        vars: &[(&str, &std::ffi::OsStr)],
    ) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kestrel"))
            .args(["dev", "--port", "0", "--model", "openai/fake"])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env!("CARGO_TARGET_TMPDIR"))
            .env("OPENAI_API_KEY", "test")
            .env("OPENAI_BASE_URL", &model.base_url)
            .env("RUST_LOG", "warn")
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let base = loop {
            let mut buf = [0u8; 512];
            let n = tokio::time::timeout_at(deadline, stdout.read(&mut buf))
                .await
                .expect("the instance did not start")
                .unwrap();
            assert!(
                n > 0,
                "the instance exited: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(line) = text.lines().find(|l| l.starts_with("Kestrel Studio: "))
                && text.contains("Press Ctrl-C")
            {
                break line["Kestrel Studio: ".len()..]
                    .trim_end_matches('/')
                    .to_owned();
            }
        };
        // Keep draining stdout so the process never blocks on a full pipe.
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok(1..) = stdout.read(&mut buf).await {}
        });
        Self {
            child,
            base,
            client: reqwest::Client::new(),
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/api{path}", self.base)
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// A chat turn (`POST /chat/assistant`, outside `/api`) with one user message.
    pub(crate) async fn chat(&self, chat_id: &str, text: &str, version: &str) -> reqwest::Response {
        let message = json!({"id": format!("{chat_id}-u"), "role": "user",
            "parts": [{"type": "text", "text": text}]});
        self.client
            .post(format!("{}/chat/assistant", self.base))
            .json(&json!({"id": chat_id, "messages": [message], "version": version}))
            .send()
            .await
            .unwrap()
    }

    /// `GET /chat/assistant/{chat_id}/stream`: re-attaching to the chat's running turn.
    pub(crate) async fn reattach(&self, chat_id: &str) -> reqwest::Response {
        self.client
            .get(format!("{}/chat/assistant/{chat_id}/stream", self.base))
            .send()
            .await
            .unwrap()
    }

    pub(crate) async fn get(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `kill -9`.
    pub(crate) async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }

    /// Sends the process a signal by name (`STOP`, `CONT`) with the `kill` program.
    pub(crate) fn signal(&self, name: &str) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }
}

/// Starts a slow turn on `instance` and waits for its first words: its events so far, and its
/// run id.
pub(crate) async fn start_slow(instance: &Instance, text: &str) -> (Events, String) {
    let events = Events::follow(
        instance
            .post("/agents/assistant/stream", run_body(text))
            .await,
    );
    let started = events.wait_for("text-delta").await;
    let run_id = started[0]["runId"].as_str().unwrap().to_owned();
    (events, run_id)
}

/// The fake model and instances `a` and `b` on it.
pub(crate) async fn two_instances(services: &Services) -> (FakeServer, Instance, Instance) {
    let model = FakeServer::start().await;
    let a = Instance::start(services, &model, "a").await;
    let b = Instance::start(services, &model, "b").await;
    (model, a, b)
}

/// Reads an SSE response's events as they come, into a shared list.
pub(crate) struct Events {
    pub(crate) seen: Arc<Mutex<Vec<Value>>>,
    pub(crate) done: tokio::task::JoinHandle<()>,
}

impl Events {
    pub(crate) fn follow(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let done = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut body = response.bytes_stream();
                let mut pending = String::new();
                while let Some(Ok(chunk)) = body.next().await {
                    pending.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(end) = pending.find("\n\n") {
                        let block = pending[..end].to_owned();
                        pending.drain(..end + 2);
                        if let Some(data) = block.strip_prefix("data: ")
                            && let Ok(event) = serde_json::from_str::<Value>(data)
                        {
                            seen.lock().unwrap().push(event);
                        }
                    }
                }
            }
        });
        Self { seen, done }
    }

    pub(crate) fn all(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) async fn wait_for(&self, kind: &str) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let all = self.all();
            if all.iter().any(|e| e["type"] == kind) {
                return all;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {kind} event: {all:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) async fn end(self) -> Vec<Value> {
        tokio::time::timeout(Duration::from_secs(20), self.done)
            .await
            .expect("the stream did not end")
            .unwrap();
        self.seen.lock().unwrap().clone()
    }
}

pub(crate) fn run_body(text: &str) -> Value {
    json!({"messages": text, "memory": {"thread": THREAD, "resource": RESOURCE}})
}

pub(crate) fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The thread's messages on `instance`: (role, text).
pub(crate) async fn thread_messages(instance: &Instance) -> Vec<Value> {
    let listed = instance
        .get(&format!(
            "/memory/threads/{THREAD}/messages?agentId=assistant&resourceId={RESOURCE}"
        ))
        .await;
    crate::as_stored(listed["messages"].as_array().map_or(&[][..], Vec::as_slice))
}

/// Polls the thread on `instance` until run `run_id`'s answer is stored (another instance
/// took the run over and finished it); returns the thread's messages then.
pub(crate) async fn wait_for_answer(instance: &Instance, run_id: &str) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let messages = thread_messages(instance).await;
        if messages.iter().any(|m| m["role"] == "assistant") {
            return messages;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run_id} was not taken over: {messages:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The thread holds one turn: the question and its answer, each once.
pub(crate) fn assert_one_turn(messages: &[Value]) {
    assert_each_once(messages);
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant"], "{messages:#?}");
}

/// Every message id of the thread appears once.
pub(crate) fn assert_each_once(messages: &[Value]) {
    let mut ids: Vec<&str> = messages.iter().filter_map(|m| m["id"].as_str()).collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "a message is stored twice: {messages:#?}");
}
