//! The integration tests of the `kestrel` binary: its commands, `kestrel dev` and the Studio
//! in a real browser.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod chaos;
mod chaos_faults;
mod cli;
mod cluster;
mod dev;
mod local_default;
mod mcp;
mod mcp_conformance;
mod models;
mod rag;
mod studio_browser;
mod takeover;
mod workflow_takeover;

/// A thread's messages as the memory route lists them (Mastra's `MastraDBMessage`: parts in
/// `content`, each tool result inside its call's `tool-invocation`), unfolded into the turn as
/// it is stored: each assistant message with its `tool-call` parts, then one `tool` message per
/// call that has a result (id `<message id>/<call id>`). The chaos tests count those.
fn as_stored(messages: &[serde_json::Value]) -> Vec<serde_json::Value> {
    use serde_json::json;
    let mut stored = Vec::new();
    for m in messages {
        let parts = m["content"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut results = Vec::new();
        let own: Vec<serde_json::Value> = parts
            .iter()
            .map(|p| {
                let call = &p["toolInvocation"];
                if p["type"] != "tool-invocation" {
                    return p.clone();
                }
                if call["state"] == "result" {
                    results.push(json!({
                        "id": format!("{}/{}", m["id"].as_str().unwrap_or("?"), call["toolCallId"].as_str().unwrap_or("?")),
                        "role": "tool",
                        "parts": [{"type": "tool-result", "toolCallId": call["toolCallId"],
                            "toolName": call["toolName"], "result": call["result"],
                            "isError": call["isError"].as_bool().unwrap_or(false)}],
                    }));
                }
                json!({"type": "tool-call", "toolCallId": call["toolCallId"],
                    "toolName": call["toolName"], "args": call["args"]})
            })
            .collect();
        stored.push(json!({"id": m["id"], "role": m["role"], "parts": own, "status": m["status"]}));
        stored.extend(results);
    }
    stored
}
