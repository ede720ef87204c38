//! Stored history: a pending approval or suspension shows the same parts as the live stream.

use serde_json::json;

use super::protocol::reduce;
use super::{V, read_stream, start, stopped_call, submit, user};

#[tokio::test]
async fn history_shows_a_pending_approval_with_the_live_parts() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("history-approval-{}", v.name());
        let live = read_stream(
            f.post("/chat/mailer", submit(&chat, "mail bob", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        let history = f.history("mailer", &chat, v.name()).await;
        assert_eq!(history.len(), 2, "{history:#?}");
        assert_eq!(history[0], user(&format!("{chat}-u1"), "mail bob"));
        assert_eq!(history[1]["id"], live.message_id());
        assert_eq!(history[1]["role"], "assistant");
        assert_eq!(
            history[1]["parts"],
            json!(reduce(Vec::new(), &live.chunks)),
            "{}",
            v.name()
        );
        if v == V::V6 {
            let tool = &history[1]["parts"][2];
            assert_eq!(tool["state"], "approval-requested");
        }

        // Decided, then asked again in a new turn (the model reuses the call id): the pending
        // parts go with the new turn's message, the old one shows its result.
        let (_, run_id) = stopped_call(&live, "data-tool-call-approval");
        let decide = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"approved": true}, "version": v.name()});
        read_stream(f.post("/chat/mailer", decide).await, v, &["call-1"]).await;
        let mut again = submit(&chat, "mail bob again", v.name());
        again["messages"][0]["id"] = json!(format!("{chat}-u2"));
        let second = read_stream(f.post("/chat/mailer", again).await, v, &[]).await;
        let history = f.history("mailer", &chat, v.name()).await;
        assert_eq!(history.len(), 4, "{history:#?}");
        assert_eq!(history[1]["parts"][2]["state"], "output-available");
        assert!(
            history[1]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["type"] != "data-tool-call-approval")
        );
        assert_eq!(history[3]["id"], second.message_id());
        assert_eq!(
            history[3]["parts"],
            json!(reduce(Vec::new(), &second.chunks))
        );
    }
}

#[tokio::test]
async fn history_shows_a_suspension_with_the_live_parts() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("history-ask-{}", v.name());
        let live = read_stream(
            f.post("/chat/asker", submit(&chat, "ask me", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        let history = f.history("asker", &chat, v.name()).await;
        assert_eq!(history.len(), 2, "{history:#?}");
        assert_eq!(history[1]["id"], live.message_id());
        assert_eq!(history[1]["parts"], json!(reduce(Vec::new(), &live.chunks)));
        assert_eq!(
            history[1]["parts"].as_array().unwrap().last().unwrap()["type"],
            "data-tool-call-suspended"
        );

        // Once resumed, the finished turn is one message: the tool's output, then the answer.
        let (_, run_id) = stopped_call(&live, "data-tool-call-suspended");
        let body = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"answer": "red"}, "version": v.name()});
        read_stream(f.post("/chat/asker", body).await, v, &["ask-1"]).await;
        let history = f.history("asker", &chat, v.name()).await;
        assert_eq!(history.len(), 2);
        let parts = &history[1]["parts"];
        assert_eq!(parts[1]["state"], "output-available");
        assert_eq!(parts[2], json!({"type": "step-start"}));
        assert_eq!(
            parts[3],
            json!({"type": "text", "text": "Thanks.", "state": "done"})
        );
    }
}
