//! `kestrel mcp serve` as a real child process over stdio, driven by Kestrel's own MCP client:
//! both protocol eras, a killed process started again on the next call, no process left
//! behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use kestrel::mcp::{McpClient, McpElicitation, McpServerConfig, Protocol, ServerState};
use kestrel::tool::{SharedTool, ToolContext};
use serde_json::{Value, json};

/// `kestrel mcp serve` on a database in `dir`; its model is never called here.
fn serve(dir: &Path) -> McpServerConfig {
    let db = dir.join("mcp.db");
    McpServerConfig::stdio(env!("CARGO_BIN_EXE_kestrel"))
        .args(["mcp", "serve", "--model", "openai/gpt-test", "--db"])
        .arg(db.to_string_lossy())
        .inherit_env(false)
        .env("OPENAI_API_KEY", "test")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
}

fn client(dir: &Path, protocol: Protocol) -> McpClient {
    McpClient::builder()
        .server("dev", serve(dir).protocol(protocol))
        .build()
        .unwrap()
}

async fn call(tools: &[SharedTool], name: &str, input: Value) -> Result<Value, String> {
    let tool = tools.iter().find(|t| t.id() == name).unwrap();
    tool.execute(input, ToolContext::standalone(name))
        .await
        .map_err(|e| e.message().to_owned())
}

/// The ids of the live (not zombie) processes whose command line names `dir`.
fn serving_processes(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(&needle) {
            found.push(pid);
        }
    }
    found
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn kestrel_mcp_serve_answers_over_stdio_in_every_era() {
    let dir = tempfile::tempdir().unwrap();
    for protocol in [Protocol::Auto, Protocol::Legacy, Protocol::Stateless] {
        let mcp = client(dir.path(), protocol.clone());
        let tools = mcp.list_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.id()).collect();
        assert_eq!(
            names,
            [
                "dev_get_weather",
                "dev_send_email",
                "dev_book_table",
                "dev_ask_assistant",
                "dev_ask_supervisor",
                "dev_ask_research",
                "dev_ask_writing",
                "dev_run_publish-post",
                "dev_run_research-brief",
                "dev_run_weather-report",
            ],
            "{protocol:?}"
        );
        let weather = call(&tools, "dev_get_weather", json!({"city": "Lisbon"}))
            .await
            .unwrap();
        assert_eq!(weather["city"], "Lisbon", "{weather}");
        // A tool that needs approval asks the client's user first; declined, it is not run.
        let email = tools.iter().find(|t| t.id() == "dev_send_email").unwrap();
        let input = json!({"to": "a@b.c", "subject": "s", "body": "b"});
        let asked = email
            .execute(input.clone(), ToolContext::standalone("dev_send_email"))
            .await
            .unwrap_err()
            .into_suspension()
            .unwrap();
        let question: McpElicitation = serde_json::from_value(asked.clone()).unwrap();
        assert!(
            question
                .message
                .contains("\"send_email\" needs your approval"),
            "{protocol:?}: {}",
            question.message
        );
        let resumed = ToolContext::standalone("dev_send_email")
            .with_resume_data(json!({"action": "decline"}))
            .with_suspend_payload(asked);
        let refused = email.execute(input, resumed).await.unwrap_err();
        assert!(
            refused.message().contains("did not approve"),
            "{protocol:?}: {}",
            refused.message()
        );
        let status = &mcp.status()[0];
        assert_eq!(status.state, ServerState::Connected);
        assert_eq!(
            status
                .server_info
                .as_deref()
                .map(|s| s.starts_with("Kestrel dev")),
            Some(true)
        );
        mcp.disconnect().await;
    }
}

#[tokio::test]
async fn a_killed_server_process_is_started_again_on_the_next_call_and_none_is_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = client(dir.path(), Protocol::Auto);
    let tools = mcp.list_tools().await.unwrap();
    let first = serving_processes(dir.path());
    assert_eq!(first.len(), 1, "one server process: {first:?}");

    // The process dies; the next call starts another and is answered.
    std::process::Command::new("kill")
        .args(["-9", &first[0].to_string()])
        .status()
        .unwrap();
    wait_for("the killed process is gone", || {
        !serving_processes(dir.path()).contains(&first[0])
    })
    .await;
    let answer = match call(&tools, "dev_get_weather", json!({"city": "Oslo"})).await {
        Ok(answer) => answer,
        // The call that found the transport dead says so; the next one connects again.
        Err(error) => {
            assert!(error.contains("\"dev\""), "{error}");
            call(&tools, "dev_get_weather", json!({"city": "Oslo"}))
                .await
                .unwrap()
        }
    };
    assert_eq!(answer["city"], "Oslo");
    let second = serving_processes(dir.path());
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second, first);

    // Disconnecting stops the process: none is left behind.
    mcp.disconnect().await;
    wait_for("no server process is left", || {
        serving_processes(dir.path()).is_empty()
    })
    .await;
    let error = call(&tools, "dev_get_weather", json!({"city": "Oslo"}))
        .await
        .unwrap_err();
    assert!(error.contains("disconnected"), "{error}");
}

#[tokio::test]
async fn a_dropped_client_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = client(dir.path(), Protocol::Legacy);
    mcp.list_tools().await.unwrap();
    assert_eq!(serving_processes(dir.path()).len(), 1);
    drop(mcp);
    wait_for("no server process is left", || {
        serving_processes(dir.path()).is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_command_that_cannot_start_is_a_connect_error_naming_it() {
    let mcp = McpClient::builder()
        .server(
            "ghost",
            McpServerConfig::stdio("/nonexistent/kestrel-mcp-server"),
        )
        .build()
        .unwrap();
    let error = mcp.list_tools().await.unwrap_err().to_string();
    assert!(
        error.contains("\"ghost\"") && error.contains("/nonexistent/kestrel-mcp-server"),
        "{error}"
    );
}

#[tokio::test]
async fn kestrel_dev_serves_the_demo_over_streamable_http() {
    use kestrel::model::{ModelSpec, ScriptedModel, ScriptedResponse};
    use kestrel_cli::dev;
    let dir = tempfile::tempdir().unwrap();
    let storage = dev::open_storage(&dir.path().join("dev.db")).await.unwrap();
    let model = ModelSpec::Model(std::sync::Arc::new(ScriptedModel::from_fn(|_| {
        ScriptedResponse::text("Sunny in Lisbon.")
    })));
    let kestrel = dev::demo_kestrel(model, std::sync::Arc::new(storage.clone())).unwrap();
    let server = dev::server(kestrel, dev::demo_memory().unwrap()).unwrap();
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let serving = tokio::spawn(server.serve_on(listener, addr));

    let servers: Value = reqwest::get(format!("http://{addr}/api/mcp/v0/servers"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(servers["servers"][0]["id"], dev::MCP_SERVER_ID);
    let mcp = McpClient::builder()
        .server(
            "dev",
            McpServerConfig::http(format!("http://{addr}/api/mcp/{}/mcp", dev::MCP_SERVER_ID)),
        )
        .build()
        .unwrap();
    let tools = mcp.list_tools().await.unwrap();
    assert_eq!(tools.len(), 10);
    let weather = call(&tools, "dev_get_weather", json!({"city": "Lisbon"}))
        .await
        .unwrap();
    assert_eq!(weather["city"], "Lisbon");
    // An agent asked over MCP answers with its run's text.
    assert_eq!(
        call(&tools, "dev_ask_research", json!({"message": "kestrels"})).await,
        Ok(json!("Sunny in Lisbon."))
    );
    mcp.disconnect().await;
    serving.abort();
    storage.close().await;
}

/// A kestrel.toml naming two MCP servers: `kitchen`, `kestrel mcp serve` on a database in
/// `dir` (its model never called), and `down`, whose command does not exist.
pub fn kitchen_config(dir: &Path) -> String {
    format!(
        r#"
        [mcp.servers.kitchen]
        command = {bin:?}
        args = ["mcp", "serve", "--model", "openai/gpt-test", "--db", {db:?}]
        inherit_env = false
        env = {{ OPENAI_API_KEY = "test", OPENAI_BASE_URL = "http://127.0.0.1:9/v1" }}

        [mcp.servers.down]
        command = "/nonexistent/kestrel-mcp-missing"
        "#,
        bin = env!("CARGO_BIN_EXE_kestrel"),
        db = dir.join("mcp.db").to_string_lossy(),
    )
}

/// `kestrel dev --config <config>`'s exit code and stderr, when it stops at once.
async fn dev_refusing(config: &Path) -> (Option<i32>, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args([
            "dev",
            "--port",
            "0",
            "--model",
            "openai/gpt-test",
            "--config",
        ])
        .arg(config)
        .env("OPENAI_API_KEY", "test")
        .output()
        .await
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn kestrel_dev_gives_the_assistant_the_tools_of_the_servers_in_kestrel_toml() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kestrel.toml");
    std::fs::write(&config, kitchen_config(dir.path())).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(["dev", "--port", "0", "--model", "openai/gpt-test", "--db"])
        .arg(dir.path().join("dev.db"))
        .arg("--config")
        .arg(&config)
        .env("OPENAI_API_KEY", "test")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env_remove("KESTREL_API_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let base = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("kestrel dev printed its address")
            .unwrap()
            .expect("kestrel dev is running");
        if let Some(url) = line.strip_prefix("Kestrel Studio: ") {
            break url.trim_end_matches('/').to_owned();
        }
    };
    // The rest of the banner, up to the MCP line.
    let report = loop {
        let line = lines.next_line().await.unwrap().unwrap();
        if line.contains("MCP servers the assistant uses") {
            break line;
        }
    };
    assert!(
        report.contains("kitchen (10 tools)") && report.contains("down (0 tools;"),
        "{report}"
    );
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{base}{path}")).send();
    let agents: Value = get("/api/agents").await.unwrap().json().await.unwrap();
    let tools = agents["assistant"]["tools"].as_object().unwrap();
    assert!(
        tools.contains_key("kitchen_get_weather") && tools.contains_key("get_weather"),
        "{:?}",
        tools.keys().collect::<Vec<_>>()
    );
    let servers: Value = get("/api/mcp-client/servers")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let servers = servers["servers"].as_array().unwrap();
    assert_eq!(servers[0]["name"], "down");
    assert_eq!(servers[0]["state"], "failed");
    assert!(
        servers[0]["lastError"]
            .as_str()
            .unwrap()
            .contains("kestrel-mcp-missing"),
        "{servers:?}"
    );
    assert_eq!(servers[1]["name"], "kitchen");
    assert_eq!(servers[1]["state"], "connected");
    // A call by hand, and a question answered by hand.
    let called: Value = http
        .post(format!(
            "{base}/api/mcp-client/servers/kitchen/tools/kitchen_get_weather/execute"
        ))
        .json(&json!({"data": {"city": "Lisbon"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(called["result"]["city"], "Lisbon", "{called}");
    let email = json!({"to": "a@b.c", "subject": "s", "body": "b"});
    let execute = format!("{base}/api/mcp-client/servers/kitchen/tools/kitchen_send_email/execute");
    let asked: Value = http
        .post(&execute)
        .json(&json!({"data": email}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        asked["question"]["message"]
            .as_str()
            .unwrap()
            .contains("needs your approval"),
        "{asked}"
    );
    let answered: Value = http
        .post(&execute)
        .json(&json!({
            "data": email,
            "question": asked["question"],
            "answer": {"action": "accept", "content": {"approve": true}},
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        answered["result"].as_str().unwrap().contains("a@b.c"),
        "{answered}"
    );
    // Bad input is named before anything is called.
    let refused = http
        .post(&execute)
        .json(&json!({"data": {"to": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let unknown = get("/api/mcp-client/servers/nope/tools").await.unwrap();
    assert_eq!(unknown.status(), 404);

    // `kestrel mcp call` against the MCP server `kestrel dev` serves: a question left
    // unanswered stops the call (exit 3, the question on stderr); answered, it goes on.
    let endpoint = format!("{base}/api/mcp/{}/mcp", kestrel_cli::dev::MCP_SERVER_ID);
    let email = r#"{"to":"ada@example.com","subject":"Hi","body":"Hello"}"#;
    let call = |answers: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kestrel"));
        command.args([
            "mcp",
            "call",
            &endpoint,
            "--tool",
            "send_email",
            "--args",
            email,
        ]);
        for answer in answers {
            command.args(["--answer", answer]);
        }
        command.output()
    };
    let asked = call(&[]).await.unwrap();
    assert_eq!(asked.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&asked.stderr);
    let question: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(question["type"], "mcp-elicitation", "{question}");
    let sent = call(&[r#"{"action":"accept","content":{"approve":true}}"#])
        .await
        .unwrap();
    assert_eq!(
        sent.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert!(String::from_utf8_lossy(&sent.stdout).contains("ada@example.com"));
    let listed = tokio::process::Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(["mcp", "call", &endpoint])
        .output()
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("get_weather\t"));
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

#[tokio::test]
async fn kestrel_dev_names_what_is_wrong_in_kestrel_toml() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kestrel.toml");
    std::fs::write(
        &config,
        "[mcp.servers.x]\ncommand = \"a\"\nurl = \"http://127.0.0.1/\"\n",
    )
    .unwrap();
    let (code, stderr) = dev_refusing(&config).await;
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("kestrel.toml") && stderr.contains("[mcp.servers.x]"),
        "{stderr}"
    );
    let (code, stderr) = dev_refusing(&dir.path().join("nope.toml")).await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("nope.toml"), "{stderr}");
}
