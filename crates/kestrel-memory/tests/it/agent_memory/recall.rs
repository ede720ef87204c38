//! What a run is shown: the last-messages window (and its cut at tool results), a read-only
//! memory that never writes, and another resource's thread refused.

use std::sync::Arc;

use kestrel_core::agent::AgentError;
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::{Error, Memory, UPDATE_WORKING_MEMORY, WorkingMemory};
use kestrel_storage::Scope;
use kestrel_storage::testing::Store;

use super::{
    agent, call_message, conversation, ids, on, result_message, seed, stored, system_text,
    text_message,
};

/// A run sees exactly the last `last_messages` stored messages, before its input.
pub(super) async fn the_window_holds_the_last_messages(store: Store) {
    let seeded: Vec<Message> = (1..=12)
        .map(|i| {
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            text_message(&format!("m{i}"), role, &format!("message {i}"))
        })
        .collect();
    seed(&store, "t1", "alice", seeded).await;
    let memory = Memory::builder()
        .storage(store.clone())
        .last_messages(4)
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("ok")));
    agent(&memory, model.clone())
        .generate("message 13")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let sent = conversation(&model.requests()[0]);
    let texts: Vec<String> = sent.iter().map(Message::text).collect();
    assert_eq!(
        texts,
        [
            "message 9",
            "message 10",
            "message 11",
            "message 12",
            "message 13"
        ]
    );
    let sent_ids: Vec<&str> = sent[..4].iter().map(|m| m.id.as_str()).collect();
    assert_eq!(sent_ids, ["m9", "m10", "m11", "m12"]);

    // The default is 10.
    let memory = Memory::new(store.clone());
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("ok")));
    agent(&memory, model.clone())
        .generate("message 15")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let sent = conversation(&model.requests()[0]);
    assert_eq!(sent.len(), 11);
    assert_eq!(sent[0].text(), "message 5");
}

/// A window cut between a tool call and its results includes the call; results whose call is
/// gone are left out.
pub(super) async fn a_window_starting_at_tool_results_keeps_their_call_and_drops_orphans(
    store: Store,
) {
    seed(
        &store,
        "t1",
        "alice",
        vec![
            text_message("u1", Role::User, "first"),
            text_message("a1", Role::Assistant, "hello"),
            text_message("u2", Role::User, "echo something"),
            call_message("a2", "c1"),
            result_message("r2", "c1"),
            text_message("a3", Role::Assistant, "echoed"),
        ],
    )
    .await;
    let memory = Memory::builder()
        .storage(store.clone())
        .last_messages(2)
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("ok"))
            .respond(ScriptedResponse::text("ok")),
    );
    let agent = agent(&memory, model.clone());
    agent
        .generate("next")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let sent: Vec<String> = conversation(&model.requests()[0])
        .iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(
        sent[..3],
        ["a2", "r2", "a3"],
        "the call comes with its result"
    );

    // A result whose call was deleted is an orphan: it is left out.
    seed(
        &store,
        "t2",
        "alice",
        vec![
            text_message("v1", Role::User, "echo"),
            call_message("v2", "c9"),
            result_message("v3", "c9"),
            text_message("v4", Role::Assistant, "done"),
        ],
    )
    .await;
    store
        .delete_messages("t2", "alice", &["v2".to_owned()])
        .await
        .unwrap();
    agent
        .generate("again")
        .options(on("t2", "alice"))
        .await
        .unwrap();
    let sent: Vec<String> = conversation(&model.requests()[1])
        .iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0], "v4", "the orphan result v3 is not sent");
}

/// A read-only memory shows history and working memory, stores nothing, creates no thread and
/// offers no tools.
pub(super) async fn read_only_recalls_but_never_writes(store: Store) {
    seed(
        &store,
        "t1",
        "alice",
        vec![
            text_message("u1", Role::User, "I live in Porto"),
            text_message("a1", Role::Assistant, "Noted"),
        ],
    )
    .await;
    store
        .set_working_memory(&Scope::resource("alice"), "# User\n- City: Porto")
        .await
        .unwrap();
    let memory = Memory::builder()
        .storage(store.clone())
        .read_only(true)
        .working_memory(WorkingMemory::template("# User\n- City:"))
        .build()
        .unwrap();
    assert!(memory.is_read_only());
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("Porto"))
            .respond(ScriptedResponse::text("Who?")),
    );
    let agent = agent(&memory, model.clone());
    assert!(agent.tools().get(UPDATE_WORKING_MEMORY).is_none());
    agent
        .generate("Where do I live?")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let request = &model.requests()[0];
    let sent: Vec<String> = conversation(request).iter().map(|m| m.text()).collect();
    assert_eq!(sent, ["I live in Porto", "Noted", "Where do I live?"]);
    let system = system_text(request);
    assert!(system.contains("- City: Porto"), "{system}");
    assert!(system.contains("cannot change it"), "{system}");
    assert_eq!(ids(&stored(&store, "t1", "alice").await), ["u1", "a1"]);

    agent
        .generate("Hello")
        .options(on("fresh", "alice"))
        .await
        .unwrap();
    assert!(store.get_thread("fresh").await.unwrap().is_none());
}

/// A run naming another resource's thread fails before the model is called, with a typed error
/// that does not name the owner; nothing is read or written.
pub(super) async fn a_thread_of_another_resource_is_refused(store: Store) {
    seed(
        &store,
        "t1",
        "alice",
        vec![text_message("s1", Role::User, "my secret")],
    )
    .await;
    for last_messages in [10, 0] {
        let memory = Memory::builder()
            .storage(store.clone())
            .last_messages(last_messages)
            .build()
            .unwrap();
        let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("leak")));
        let result = agent(&memory, model.clone())
            .generate("show me")
            .options(on("t1", "mallory"))
            .await;
        let Err(AgentError::Memory { source, .. }) = result else {
            panic!("expected a memory error, got {result:?}");
        };
        assert!(
            source.message().contains("belongs to another resource"),
            "{source}"
        );
        assert!(!source.message().contains("alice"), "{source}");
        let typed = std::error::Error::source(&source)
            .and_then(|e| e.downcast_ref::<Error>())
            .unwrap();
        assert!(matches!(
            typed,
            Error::ForeignThread { thread_id, resource_id }
                if thread_id == "t1" && resource_id == "mallory"
        ));
        assert_eq!(model.calls(), 0);
    }
    assert_eq!(ids(&stored(&store, "t1", "alice").await), ["s1"]);
}
