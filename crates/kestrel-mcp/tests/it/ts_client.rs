//! The official TypeScript MCP client (`@modelcontextprotocol/client` 2.x, from
//! compat-tests/node_modules) against a Kestrel MCP server over Streamable HTTP: pinned to
//! 2026-07-28, in the legacy era, and negotiating (`auto`). Runs when KESTREL_TEST_JS=1 (CI
//! sets it), else skips saying so.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::fixture::{serve_http, server};

fn compat_tests() -> Option<PathBuf> {
    if std::env::var("KESTREL_TEST_JS").as_deref() != Ok("1") {
        eprintln!("skipping: KESTREL_TEST_JS=1 runs the TypeScript MCP client");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../compat-tests");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/client")
            .is_dir(),
        "{} has no @modelcontextprotocol/client: run `npm ci` there",
        dir.display()
    );
    Some(dir)
}

/// The script's two lines: the plain client's answers, and the asking client's.
async fn ts_client(dir: &std::path::Path, url: &str, mode: &str) -> (Value, Value) {
    let output = tokio::process::Command::new("node")
        .arg("mcp-client.mjs")
        .args([url, mode])
        .current_dir(dir)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap());
    (lines.next().unwrap(), lines.next().unwrap())
}

#[tokio::test]
async fn the_typescript_client_talks_to_a_kestrel_server_in_every_mode() {
    let Some(dir) = compat_tests() else { return };
    let (url, stop) = serve_http(server()).await;
    for (mode, version) in [
        ("2026-07-28", "2026-07-28"),
        ("legacy", "2025-11-25"),
        ("auto", "2026-07-28"),
    ] {
        let (answer, asking) = ts_client(&dir, &url, mode).await;
        assert_eq!(answer["version"], version, "{mode}: {answer}");
        assert_eq!(answer["server"], "Kestrel fixture", "{mode}");
        assert_eq!(
            answer["tools"],
            json!([
                "add",
                "fail",
                "nap",
                "delete",
                "book",
                "ask_helper",
                "ask_clerk",
                "run_greet"
            ]),
            "{mode}"
        );
        assert_eq!(
            answer["add"]["structuredContent"],
            json!({"sum": 42}),
            "{mode}: {answer}"
        );
        assert_eq!(
            answer["add"]["content"][0]["text"], r#"{"sum":42}"#,
            "{mode}"
        );
        // Refused before anything ran: an error result, or an error the SDK throws.
        let refused = answer["refused"].to_string();
        assert!(
            answer["refused"]["isError"] == true || refused.contains("thrown"),
            "{mode}: {refused}"
        );
        assert_eq!(answer["approval"]["isError"], true, "{mode}: {answer}");
        assert!(
            answer["approval"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("needs a person's approval"),
            "{mode}: {answer}"
        );

        // A client that can be asked is asked, and the calls go on with its answers.
        assert_eq!(asking["version"], version, "{mode}: {asking}");
        assert_eq!(
            asking["approved"]["content"][0]["text"], "deleted",
            "{mode}: {asking}"
        );
        assert_eq!(
            asking["booked"]["content"][0]["text"], "Tivoli booked for 2 nights",
            "{mode}: {asking}"
        );
        assert_eq!(
            asking["clerk"]["content"][0]["text"], "clerk: \"deleted\"",
            "{mode}: {asking}"
        );
        let asked = asking["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 3, "{mode}: {asking}");
        assert!(
            asked[0]
                .as_str()
                .unwrap()
                .contains("\"delete\" needs your approval"),
            "{mode}: {asking}"
        );
        assert_eq!(asked[1], "How many nights?", "{mode}: {asking}");
    }
    stop.cancel();
}
