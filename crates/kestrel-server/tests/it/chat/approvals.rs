//! Approvals and suspensions: v5 data parts and resume data, v6 approval requests and
//! responses, declines, several approvals at once, a sub-agent's approval, and resumes.

use serde_json::json;

use super::protocol::reduce;
use super::{V, answered_message, error_of, read_stream, start, stopped_call, submit, user};

#[tokio::test]
async fn a_v5_approval_is_a_data_part_and_resume_data_approves_it() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/mailer", submit("v5-approve", "mail bob", "v5"))
            .await,
        V::V5,
        &[],
    )
    .await;
    assert!(first.of_type("tool-approval-request").is_empty(), "v6 only");
    let (data, run_id) = stopped_call(&first, "data-tool-call-approval");
    assert_eq!(data["id"], "call-1");
    assert_eq!(data["data"]["toolName"], "send_email");
    assert_eq!(data["data"]["args"], json!({"to": "bob@example.com"}));
    assert!(
        data["data"]["resumeSchema"]
            .as_str()
            .unwrap()
            .contains("approved")
    );
    assert_eq!(
        first.types()[first.chunks.len() - 2..],
        ["finish-step", "finish"]
    );

    // Seed 001's handleResume: sendMessage(undefined, {body: {runId, resumeData}}).
    let body = json!({
        "id": "v5-approve",
        "messages": [],
        "trigger": "submit-message",
        "runId": run_id,
        "resumeData": {"approved": true},
    });
    let next = read_stream(f.post("/chat/mailer", body).await, V::V5, &["call-1"]).await;
    // The same assistant message goes on.
    assert_eq!(next.message_id(), first.message_id());
    let resolved = next.of_type("data-tool-call-approval")[0];
    assert_eq!(resolved["id"], "call-1");
    assert_eq!(resolved["data"]["resumed"], true);
    assert_eq!(resolved["data"]["approved"], true);
    assert_eq!(
        next.of_type("tool-output-available")[0]["output"],
        "sent to bob@example.com"
    );
    let text: String = next
        .of_type("text-delta")
        .iter()
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Done.");
    // A second answer finds nothing waiting.
    let again = json!({"id": "v5-approve", "messages": [], "runId": run_id, "resumeData": {"approved": true}});
    error_of(f.post("/chat/mailer", again).await, 409, "not_suspended").await;
}

#[tokio::test]
async fn a_v6_approval_round_trips_through_the_message_parts() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/mailer", submit("v6-approve", "mail bob", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let request = first.of_type("tool-approval-request")[0].clone();
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    assert_eq!(request["approvalId"], json!(format!("{run_id}::call-1")));
    // The approval request comes between the call and the data part.
    let order: Vec<&str> = first.types();
    let at = |t: &str| order.iter().position(|x| *x == t).unwrap();
    assert!(at("tool-input-available") < at("tool-approval-request"));
    assert!(at("tool-approval-request") < at("data-tool-call-approval"));

    let parts = reduce(Vec::new(), &first.chunks);
    let body = json!({
        "id": "v6-approve",
        "messages": [user("v6-approve-u1", "mail bob"), answered_message(&first.message_id(), &parts, true, None)],
        "trigger": "submit-message",
        "version": "v6",
    });
    let next = read_stream(f.post("/chat/mailer", body).await, V::V6, &["call-1"]).await;
    assert_eq!(next.message_id(), first.message_id());
    assert_eq!(
        next.of_type("tool-output-available")[0]["toolCallId"],
        "call-1"
    );
    let parts = reduce(parts, &next.chunks);
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-send_email")
        .unwrap();
    assert_eq!(tool["state"], "output-available");
}

#[tokio::test]
async fn a_v6_decline_ends_in_tool_output_denied_and_v5_in_an_error() {
    let f = start(|s| s).await;
    // v6: declined in the message parts.
    let first = read_stream(
        f.post("/chat/mailer", submit("v6-decline", "mail bob", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let parts = reduce(Vec::new(), &first.chunks);
    let body = json!({
        "id": "v6-decline",
        "messages": [answered_message(&first.message_id(), &parts, false, Some("not now"))],
        "version": "v6",
    });
    let next = read_stream(f.post("/chat/mailer", body).await, V::V6, &["call-1"]).await;
    assert_eq!(
        next.of_type("tool-output-denied")[0],
        &json!({"type": "tool-output-denied", "toolCallId": "call-1"})
    );
    assert!(next.of_type("tool-output-error").is_empty());
    let resolved = next.of_type("data-tool-call-approval")[0];
    assert_eq!(resolved["data"]["approved"], false);
    let parts = reduce(parts, &next.chunks);
    assert_eq!(
        parts
            .iter()
            .find(|p| p["type"] == "tool-send_email")
            .unwrap()["state"],
        "output-denied"
    );
    // The stored history shows the denial too, with the reason (v5 has no denied state: an
    // error with the reason).
    let stored = f.history("mailer", "v6-decline", "v6").await;
    let tool = stored.last().unwrap()["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-send_email")
        .unwrap()
        .clone();
    assert_eq!(tool["state"], "output-denied", "{tool}");
    assert_eq!(tool["approval"]["approved"], false);
    assert_eq!(tool["approval"]["reason"], "not now");
    let stored_v5 = f.history("mailer", "v6-decline", "v5").await;
    let tool_v5 = stored_v5.last().unwrap()["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-send_email")
        .unwrap()
        .clone();
    assert_eq!(tool_v5["state"], "output-error", "{tool_v5}");
    assert_eq!(tool_v5["errorText"], "not now");

    // v5: declined with resumeData; the model reads the reason.
    let first = read_stream(
        f.post("/chat/mailer", submit("v5-decline", "mail bob", "v5"))
            .await,
        V::V5,
        &[],
    )
    .await;
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    let body = json!({"id": "v5-decline", "messages": [], "runId": run_id, "resumeData": {"approved": false, "reason": "not now"}});
    let next = read_stream(f.post("/chat/mailer", body).await, V::V5, &["call-1"]).await;
    assert_eq!(next.of_type("tool-output-error")[0]["errorText"], "not now");
}

#[tokio::test]
async fn several_v6_approvals_answered_at_once_are_all_decided() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/pair", submit("pair", "mail both", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    assert_eq!(first.of_type("tool-approval-request").len(), 2);
    assert_eq!(first.of_type("data-tool-call-approval").len(), 2);
    // The stored history shows both, as the stream did.
    let history = f.history("pair", "pair", "v6").await;
    let parts = reduce(Vec::new(), &first.chunks);
    assert_eq!(history[1]["parts"], json!(parts));

    // One approved, one declined, in one message.
    let mut answered = parts.clone();
    for part in answered
        .iter_mut()
        .filter(|p| p["state"] == "approval-requested")
    {
        let approve = part["toolCallId"] == "c-a";
        part["state"] = json!("approval-responded");
        part["approval"]["approved"] = json!(approve);
    }
    let body = json!({
        "id": "pair",
        "messages": [{"id": first.message_id(), "role": "assistant", "parts": answered}],
        "version": "v6",
    });
    let next = read_stream(f.post("/chat/pair", body).await, V::V6, &["c-a", "c-b"]).await;
    let parts = reduce(parts, &next.chunks);
    let state = |call: &str| {
        parts
            .iter()
            .find(|p| p["toolCallId"] == call && p["type"] == "tool-send_email")
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state("c-a"), "output-available");
    assert_eq!(state("c-b"), "output-denied");
    let text: String = next
        .of_type("text-delta")
        .iter()
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Both handled.");
    assert_eq!(next.chunks.last().unwrap()["finishReason"], "stop");
}

#[tokio::test]
async fn a_sub_agents_approval_is_decided_through_the_supervisor() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("delegation-{}", v.name());
        let first = read_stream(
            f.post("/chat/supervisor", submit(&chat, "mail bob", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        // The sub-agent's call has no part of its own in the supervisor's message: no
        // approval request, only the data part, naming the delegation it sits under.
        assert!(first.of_type("tool-approval-request").is_empty());
        let (data, run_id) = stopped_call(&first, "data-tool-call-approval");
        assert_eq!(data["id"], "h1");
        assert_eq!(data["data"]["via"][0]["toolCallId"], "d1");
        assert_eq!(data["data"]["via"][0]["agentId"], "helper");
        // The sub-agent's live events pass by for onData, not stored in the message.
        assert!(
            first
                .of_type("data-tool-output")
                .iter()
                .all(|c| c["transient"] == true)
        );
        let history = f.history("supervisor", &chat, v.name()).await;
        assert_eq!(
            history[1]["parts"],
            json!(reduce(Vec::new(), &first.chunks))
        );

        let body = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"approved": true}, "version": v.name()});
        let next = read_stream(f.post("/chat/supervisor", body).await, v, &["d1"]).await;
        assert_eq!(next.of_type("tool-output-available")[0]["toolCallId"], "d1");
        let text: String = next
            .of_type("text-delta")
            .iter()
            .map(|c| c["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, "All done.");
    }
}

#[tokio::test]
async fn a_suspension_is_a_data_part_and_resume_data_continues_it() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("ask-{}", v.name());
        let first = read_stream(
            f.post("/chat/asker", submit(&chat, "ask me", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        let (data, run_id) = stopped_call(&first, "data-tool-call-suspended");
        assert_eq!(data["id"], "ask-1");
        assert_eq!(data["data"]["state"], "data-tool-call-suspended");
        assert_eq!(
            data["data"]["suspendPayload"],
            json!({"question": "Which colour?"})
        );
        assert!(
            data["data"]["resumeSchema"]
                .as_str()
                .unwrap()
                .contains("answer")
        );
        // The suspension follows its call at once.
        let types = first.types();
        let at = types
            .iter()
            .position(|t| *t == "data-tool-call-suspended")
            .unwrap();
        assert_eq!(types[at - 1], "tool-input-available");

        // Resume data that does not match the tool's schema leaves the run suspended.
        let bad = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"nope": 1}, "version": v.name()});
        error_of(f.post("/chat/asker", bad).await, 422, "invalid_resume_data").await;
        let body = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"answer": "blue"}, "version": v.name()});
        let next = read_stream(f.post("/chat/asker", body).await, v, &["ask-1"]).await;
        assert_eq!(
            next.of_type("tool-output-available")[0]["output"],
            json!({"topic": "colour", "answer": "blue"})
        );
        assert_eq!(
            next.of_type("data-tool-call-suspended")[0]["data"]["resumed"],
            true
        );
    }
}
