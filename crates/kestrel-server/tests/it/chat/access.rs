//! Bad requests and access: bodies refused with JSON errors, tokens guarding the chat, and
//! callers pinned to their resource.

use serde_json::json;

use super::protocol::reduce;
use super::{
    V, answered_message, error_of, first_bytes, read_rest, read_stream, start, stopped_call,
    submit, user,
};

#[tokio::test]
async fn bad_bodies_are_json_errors() {
    let f = start(|s| s).await;
    let raw = f
        .http
        .post(format!("{}/chat/echo", f.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    error_of(raw, 400, "invalid_json").await;
    let refused = [
        ("/chat/echo", json!({"messages": "hi"}), 422, "invalid_body"),
        (
            "/chat/echo",
            json!({"messages": [user("u", "hi")], "trigger": "guess"}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [user("u", "hi")], "version": "v9"}),
            422,
            "invalid_body",
        ),
        ("/chat/echo", json!({"messages": []}), 422, "invalid_body"),
        (
            "/chat/echo",
            json!({"messages": [{"role": "user"}]}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [{"role": "robot", "parts": []}]}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [{"role": "user", "parts": [{"type": "file"}]}]}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [], "resumeData": {"approved": true}}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [user("u", "hi")], "maxSteps": 0}),
            422,
            "invalid_body",
        ),
        ("/chat/nobody", submit("x", "hi", "v5"), 404, "not_found"),
        (
            "/chat/mailer",
            json!({"messages": [], "runId": "no-such-run", "resumeData": {"approved": true}}),
            404,
            "not_found",
        ),
    ];
    for (path, body, status, code) in refused {
        let message = error_of(f.post(path, body.clone()).await, status, code).await;
        assert!(!message.is_empty(), "{body}");
    }
    error_of(
        f.get_as(None, "/chat/echo/x/messages?version=v7").await,
        400,
        "invalid_query",
    )
    .await;

    // An approval answered with anything but {approved}.
    let first = read_stream(
        f.post("/chat/mailer", submit("bad-approval", "mail", "v5"))
            .await,
        V::V5,
        &[],
    )
    .await;
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    let body = json!({"messages": [], "runId": run_id, "resumeData": {"answer": "yes"}});
    error_of(
        f.post("/chat/mailer", body).await,
        422,
        "invalid_resume_data",
    )
    .await;
    let body = json!({"messages": [{"id": "m", "role": "assistant", "parts": [
        {"type": "tool-send_email", "toolCallId": "call-1", "state": "approval-responded", "approval": {"id": "no-separator", "approved": true}}
    ]}]});
    error_of(f.post("/chat/mailer", body).await, 422, "invalid_body").await;
}

#[tokio::test]
async fn tokens_guard_the_chat_and_pin_callers_to_their_resource() {
    let f = start(|s| {
        s.token("admin")
            .resource_token("ada-token", "ada")
            .resource_token("bo-token", "bo")
    })
    .await;
    error_of(
        f.post_as(None, "/chat/echo", submit("c", "hi", "v5")).await,
        401,
        "unauthorized",
    )
    .await;
    error_of(
        f.post_as(Some("wrong"), "/chat/echo", submit("c", "hi", "v5"))
            .await,
        401,
        "unauthorized",
    )
    .await;
    error_of(
        f.get_as(None, "/chat/echo/c/stream").await,
        401,
        "unauthorized",
    )
    .await;
    error_of(
        f.get_as(None, "/chat/echo/c/messages").await,
        401,
        "unauthorized",
    )
    .await;

    // A pinned caller cannot name another resource.
    let mut body = submit("ada-chat", "hi", "v5");
    body["memory"] = json!({"thread": "ada-chat", "resource": "bo"});
    error_of(
        f.post_as(Some("ada-token"), "/chat/echo", body).await,
        403,
        "forbidden",
    )
    .await;

    // Ada's pending approval: Bo can neither decide it nor read its history.
    let first = read_stream(
        f.post_as(
            Some("ada-token"),
            "/chat/mailer",
            submit("ada-mail", "mail", "v6"),
        )
        .await,
        V::V6,
        &[],
    )
    .await;
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    let decide = json!({"id": "ada-mail", "messages": [], "runId": run_id, "resumeData": {"approved": true}});
    error_of(
        f.post_as(Some("bo-token"), "/chat/mailer", decide.clone())
            .await,
        404,
        "not_found",
    )
    .await;
    let parts = reduce(Vec::new(), &first.chunks);
    let answer = json!({"id": "ada-mail", "messages": [answered_message(&first.message_id(), &parts, true, None)], "version": "v6"});
    error_of(
        f.post_as(Some("bo-token"), "/chat/mailer", answer).await,
        404,
        "not_found",
    )
    .await;
    error_of(
        f.get_as(Some("bo-token"), "/chat/mailer/ada-mail/messages")
            .await,
        404,
        "not_found",
    )
    .await;
    let history = f
        .get_as(
            Some("ada-token"),
            "/chat/mailer/ada-mail/messages?version=v6",
        )
        .await;
    assert_eq!(history.status(), 200);
    // Ada decides it.
    read_stream(
        f.post_as(Some("ada-token"), "/chat/mailer", decide).await,
        V::V5,
        &["call-1"],
    )
    .await;

    // Bo cannot re-attach to Ada's running turn; Ada and the admin can.
    let mut running = f
        .post_as(
            Some("ada-token"),
            "/chat/slow",
            submit("ada-slow", "go", "v5"),
        )
        .await;
    let seen = first_bytes(&mut running).await;
    error_of(
        f.get_as(Some("bo-token"), "/chat/slow/ada-slow/stream")
            .await,
        404,
        "not_found",
    )
    .await;
    read_stream(
        f.get_as(Some("admin"), "/chat/slow/ada-slow/stream").await,
        V::V5,
        &[],
    )
    .await;
    read_rest(running, seen, V::V5, &[]).await;
}
