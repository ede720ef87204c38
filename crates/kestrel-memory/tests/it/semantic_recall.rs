//! Semantic recall driving a real agent on every backend: the in-memory store, SQLite (a
//! temporary file per test) and PostgreSQL (a fresh schema per test, when
//! `KESTREL_TEST_POSTGRES_URL` is set; otherwise those tests say they are skipped and pass).
//!
//! The embedder is `HashEmbedder` (bag of words and trigrams): texts that share words are close,
//! so which old message matches a question is predictable. One test runs the real local
//! all-MiniLM-L6-v2 model when `KESTREL_TEST_MINILM_DIR` names it, to show recall by meaning.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::{Agent, AgentError, RunOptions};
use kestrel_core::embedding::{EmbedError, Embedder, HashEmbedder, ScriptedEmbedder};
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_memory::{
    Error, Memory, MessageRange, SemanticRecall, SemanticRecallScope, default_index_name,
};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{Selection, StoredMessage, VectorFilter, VectorQuery};
use serde_json::{Value, json};

on_every_backend!(
    a_later_question_recalls_the_matching_old_turn_with_its_neighbour,
    messages_the_run_already_sees_do_not_use_up_top_k,
    resource_scope_recalls_other_threads_of_the_resource_only,
    only_user_and_assistant_text_is_indexed,
    an_index_of_another_dimension_is_a_typed_error,
    a_failing_embedder_loses_no_message_and_fails_no_run,
    recall_by_meaning_with_the_local_embedder,
);

// ---------------------------------------------------------------------------------------------
// Helpers

/// Four earlier turns about unrelated topics.
const TURNS: [(&str, &str); 4] = [
    (
        "My sister Clara lives in Lisbon, near the river.",
        "Lisbon sounds lovely.",
    ),
    (
        "I practise the cello every evening after work.",
        "Daily cello practice pays off.",
    ),
    (
        "The car needs winter tyres before December.",
        "Book the garage early.",
    ),
    (
        "For the garden we chose tomatoes and basil.",
        "Tomatoes and basil grow well together.",
    ),
];

const QUESTION: &str = "Which city does my sister Clara live in?";

fn embedder() -> Arc<HashEmbedder> {
    Arc::new(HashEmbedder::new(256))
}

fn memory(store: &Store, recall: SemanticRecall) -> Memory {
    Memory::builder()
        .storage(store.clone())
        .last_messages(2)
        .semantic_recall(recall)
        .build()
        .unwrap()
}

fn scripted(answers: &[&str]) -> Arc<ScriptedModel> {
    let mut model = ScriptedModel::new();
    for answer in answers {
        model = model.respond(ScriptedResponse::text(*answer));
    }
    Arc::new(model)
}

fn agent(memory: &Memory, model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("assistant")
        .instructions("You are a test assistant.")
        .model(model)
        .tool(
            create_tool("echo")
                .description("Echoes its input")
                .input_schema(json!({"type": "object"}))
                .execute(|v: Value, _ctx| async move { Ok(v) }),
        )
        .memory(memory.clone())
        .build()
        .unwrap()
}

fn on(thread: &str, resource: &str) -> RunOptions {
    RunOptions::new().memory(thread, resource)
}

/// Has the conversation `turns` on `thread` through an agent over `memory`.
async fn converse(memory: &Memory, thread: &str, resource: &str, turns: &[(&str, &str)]) {
    let answers: Vec<&str> = turns.iter().map(|(_, answer)| *answer).collect();
    let agent = agent(memory, scripted(&answers));
    for (question, _) in turns {
        agent
            .generate(*question)
            .options(on(thread, resource))
            .await
            .unwrap();
    }
}

/// Asks `question` on `thread` and returns the model's request.
async fn ask(memory: &Memory, thread: &str, resource: &str, question: &str) -> ModelRequest {
    let model = scripted(&["Noted."]);
    agent(memory, model.clone())
        .generate(question)
        .options(on(thread, resource))
        .await
        .unwrap();
    model.requests().remove(0)
}

async fn stored(store: &Store, thread: &str, resource: &str) -> Vec<StoredMessage> {
    store
        .list_messages(thread, Some(resource), Selection::all())
        .await
        .unwrap()
        .messages
}

/// The texts of a request's messages after the system messages.
fn conversation(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(Message::text)
        .collect()
}

/// The texts of a request's system messages, joined.
fn system_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ids in `index` of the vectors of `thread`.
async fn indexed(store: &Store, index: &str, thread: &str) -> Vec<String> {
    let query = VectorQuery {
        vector: vec![1.0; 256],
        top_k: 100,
        filter: VectorFilter {
            thread_id: Some(thread.into()),
            resource_id: None,
        },
    };
    let mut ids: Vec<String> = store
        .query_vectors(index, query)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    ids.sort();
    ids
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// With a window of 2, a question about an old turn brings that turn's message (and its answer,
/// the neighbour after it) into the request, in its place before the window; the unrelated
/// turns stay out.
async fn a_later_question_recalls_the_matching_old_turn_with_its_neighbour(store: Store) {
    let memory = memory(&store, SemanticRecall::new(embedder()).top_k(1));
    converse(&memory, "t1", "alice", &TURNS).await;

    let request = ask(&memory, "t1", "alice", QUESTION).await;
    assert_eq!(
        conversation(&request),
        [
            TURNS[0].0, TURNS[0].1, // recalled: the match and the message after it
            TURNS[3].0, TURNS[3].1, // the window
            QUESTION,
        ]
    );
    // This thread's matches are history, not system text.
    assert!(!system_text(&request).contains("Earlier conversations"));

    // The recalled messages are the stored ones, ids included.
    let thread = stored(&store, "t1", "alice").await;
    let ids: Vec<&str> = request.messages.iter().map(|m| m.id.as_str()).collect();
    assert!(ids.contains(&thread[0].id.as_str()) && ids.contains(&thread[1].id.as_str()));

    // Without neighbours, only the match; with a minimum score nothing reaches, nothing.
    let bare = memory_with(&store, |r| r.top_k(1).message_range(0));
    let request = ask(&bare, "t1", "alice", QUESTION).await;
    assert_eq!(
        conversation(&request),
        [TURNS[0].0, QUESTION, "Noted.", QUESTION]
    );
    let strict = memory_with(&store, |r| r.top_k(4).min_score(0.99));
    let request = ask(&strict, "t1", "alice", "Tell me about Clara").await;
    assert_eq!(
        conversation(&request).len(),
        3,
        "the window and the input only"
    );
}

fn memory_with(store: &Store, options: impl FnOnce(SemanticRecall) -> SemanticRecall) -> Memory {
    memory(store, options(SemanticRecall::new(embedder())))
}

/// A match inside the recent window (or the input itself, indexed before the search) is not
/// counted: `top_k` goes to older messages.
async fn messages_the_run_already_sees_do_not_use_up_top_k(store: Store) {
    let memory = memory(
        &store,
        SemanticRecall::new(embedder())
            .top_k(1)
            .message_range(MessageRange::new(0, 0)),
    );
    converse(&memory, "t1", "alice", &TURNS).await;

    // The garden turn is in the window and matches best; the best older match comes in instead.
    let request = ask(&memory, "t1", "alice", "Tomatoes and basil in the garden").await;
    let texts = conversation(&request);
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(
        TURNS[..3]
            .iter()
            .any(|(q, a)| texts[0] == *q || texts[0] == *a),
        "{texts:?}"
    );
    assert_eq!(
        texts[1..],
        [TURNS[3].0, TURNS[3].1, "Tomatoes and basil in the garden"]
    );
}

/// Resource scope (the default) finds the resource's other threads and shows them as earlier
/// conversations in the system text; another resource's messages never appear, even the most
/// similar one. Thread scope stays in the thread.
async fn resource_scope_recalls_other_threads_of_the_resource_only(store: Store) {
    assert_eq!(
        SemanticRecallScope::default(),
        SemanticRecallScope::Resource
    );
    let memory = memory(&store, SemanticRecall::new(embedder()).top_k(1));
    converse(&memory, "alice-old", "alice", &TURNS[..1]).await;
    converse(&memory, "alice-hobby", "alice", &TURNS[1..2]).await;
    // Bob's message is the question itself: the best match, were the filter missing.
    converse(
        &memory,
        "bob-1",
        "bob",
        &[(QUESTION, "Clara lives in Porto.")],
    )
    .await;

    let request = ask(&memory, "alice-new", "alice", QUESTION).await;
    assert_eq!(conversation(&request), [QUESTION]);
    let system = system_text(&request);
    assert!(system.contains("# Earlier conversations"), "{system}");
    assert!(
        system.contains("<earlier_conversation thread_id=\"alice-old\" from=\""),
        "{system}"
    );
    assert!(
        system.contains(&format!("user: {}", TURNS[0].0)),
        "{system}"
    );
    assert!(
        system.contains(&format!("assistant: {}", TURNS[0].1)),
        "{system}"
    );
    assert!(system.contains(" UTC] user: "), "timestamps: {system}");
    assert!(
        !system.contains("Porto") && !system.contains("bob"),
        "{system}"
    );
    assert!(!system.contains("cello"), "{system}");

    // Bob gets his own thread, never Alice's.
    let request = ask(&memory, "bob-2", "bob", QUESTION).await;
    let system = system_text(&request);
    assert!(system.contains("Clara lives in Porto."), "{system}");
    assert!(
        !system.contains("Lisbon") && !system.contains("alice"),
        "{system}"
    );

    // Thread scope: a new thread has nothing to recall.
    let thread_only = memory_with(&store, |r| r.top_k(4).scope(SemanticRecallScope::Thread));
    let request = ask(&thread_only, "alice-newer", "alice", QUESTION).await;
    assert_eq!(conversation(&request), [QUESTION]);
    assert!(!system_text(&request).contains("Earlier conversations"));
}

/// Tool calls and results are stored but not embedded; user and assistant text is, under the
/// message id, in the index named after the embedder.
async fn only_user_and_assistant_text_is_indexed(store: Store) {
    let memory = memory(&store, SemanticRecall::new(embedder()));
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call("c1", "echo", json!({"x": 1})))
            .respond(ScriptedResponse::text("Echoed.")),
    );
    agent(&memory, model)
        .generate("Echo one")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let thread = stored(&store, "t1", "alice").await;
    let roles: Vec<Role> = thread.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );

    let index = default_index_name(&HashEmbedder::new(256), 256);
    assert_eq!(index, "memory_messages_hash_hash_256_256");
    assert_eq!(store.index_dimension(&index).await.unwrap(), Some(256));
    assert_eq!(
        indexed(&store, &index, "t1").await,
        sorted(vec![thread[0].id.clone(), thread[3].id.clone()])
    );

    // Deleting a message deletes its vector.
    store
        .delete_messages("t1", "alice", std::slice::from_ref(&thread[3].id))
        .await
        .unwrap();
    assert_eq!(indexed(&store, &index, "t1").await, [thread[0].id.clone()]);
}

/// An explicit index of another dimension fails the run before the model is called, storing or
/// read-only, with a typed error naming both dimensions.
async fn an_index_of_another_dimension_is_a_typed_error(store: Store) {
    store.create_index("shared", 8).await.unwrap();
    let recall = SemanticRecall::new(Arc::new(HashEmbedder::new(64))).index_name("shared");
    let writing = memory(&store, recall.clone());
    let reading = Memory::builder()
        .storage(store.clone())
        .read_only(true)
        .semantic_recall(recall)
        .build()
        .unwrap();
    for memory in [writing, reading] {
        let model = scripted(&["unreachable"]);
        let result = agent(&memory, model.clone())
            .generate(QUESTION)
            .options(on("t1", "alice"))
            .await;
        let Err(AgentError::Memory { source, .. }) = result else {
            panic!("expected a memory error, got {result:?}");
        };
        let typed = std::error::Error::source(&source)
            .and_then(|e| e.downcast_ref::<Error>())
            .unwrap();
        assert!(
            matches!(
                typed,
                Error::IndexDimension { index, embedder, index_dimension: 8, embedder_dimension: 64 }
                    if index == "shared" && embedder == "hash/hash-64"
            ),
            "{typed:?}"
        );
        let message = source.message();
        assert!(message.contains("`shared`") && message.contains("8-dimensional"));
        assert!(message.contains("64-dimensional"), "{message}");
        assert_eq!(model.calls(), 0);
    }
    assert_eq!(store.index_dimension("shared").await.unwrap(), Some(8));
}

/// An embedder failing while messages are stored, or while the input is searched for, fails no
/// run and loses no message: only the indexing of those messages is lost.
async fn a_failing_embedder_loses_no_message_and_fails_no_run(store: Store) {
    let embedder = Arc::new(ScriptedEmbedder::new(256));
    let memory = memory(&store, SemanticRecall::new(embedder.clone()).top_k(1));
    let unavailable = || EmbedError::Unavailable {
        provider: "scripted".into(),
        model: "scripted-256".into(),
        message: "down for maintenance".into(),
    };

    // The input's embedding fails (so the search embeds it again, and succeeds); the answer is
    // indexed.
    embedder.fail_next(unavailable());
    let result = agent(&memory, scripted(&["Lisbon sounds lovely."]))
        .generate(TURNS[0].0)
        .options(on("t1", "alice"))
        .await
        .unwrap();
    assert_eq!(result.text, "Lisbon sounds lovely.");
    let thread = stored(&store, "t1", "alice").await;
    let texts: Vec<String> = thread.iter().map(|m| m.to_message().text()).collect();
    assert_eq!(texts, [TURNS[0].0, TURNS[0].1]);
    let index = default_index_name(embedder.as_ref(), 256);
    assert_eq!(indexed(&store, &index, "t1").await, [thread[1].id.clone()]);
    assert_eq!(embedder.calls().len(), 3, "input, input again, answer");

    // Everything fails: storing the input, searching, storing the answer.
    for _ in 0..3 {
        embedder.fail_next(unavailable());
    }
    let model = scripted(&["Still here."]);
    let result = agent(&memory, model.clone())
        .generate(QUESTION)
        .options(on("t1", "alice"))
        .await
        .unwrap();
    assert_eq!(result.text, "Still here.");
    assert_eq!(
        conversation(&model.requests()[0]),
        [TURNS[0].0, TURNS[0].1, QUESTION],
        "the window, without recall"
    );
    assert_eq!(stored(&store, "t1", "alice").await.len(), 4);
    assert_eq!(indexed(&store, &index, "t1").await, [thread[1].id.clone()]);
}

/// With the real all-MiniLM-L6-v2 model, a question sharing no word with the old message finds
/// it by meaning. Needs `KESTREL_TEST_MINILM_DIR` (the model's directory or a Kestrel model
/// cache holding it); skipped otherwise.
async fn recall_by_meaning_with_the_local_embedder(store: Store) {
    let Some(embedder) = local_embedder() else {
        eprintln!(
            "skipped recall_by_meaning_with_the_local_embedder: set KESTREL_TEST_MINILM_DIR to \
             all-MiniLM-L6-v2's directory (or a model cache holding it)"
        );
        return;
    };
    assert_eq!(embedder.dimension(), 384);
    let memory = Memory::builder()
        .storage(store.clone())
        .last_messages(2)
        .semantic_recall(SemanticRecall::new(embedder).top_k(1).message_range(0))
        .build()
        .unwrap();
    let turns = [
        (
            "Last week I adopted a puppy, a small beagle.",
            "Congratulations!",
        ),
        (
            "The quarterly tax filing is due on Friday.",
            "Noted, Friday.",
        ),
        ("We are repainting the kitchen walls blue.", "Nice colour."),
        ("Any tips for a first marathon?", "Start slowly."),
    ];
    converse(&memory, "t1", "alice", &turns).await;

    let question = "How is your new dog doing?";
    let request = ask(&memory, "t1", "alice", question).await;
    assert_eq!(
        conversation(&request),
        [turns[0].0, turns[3].0, turns[3].1, question]
    );
}

fn local_embedder() -> Option<Arc<dyn Embedder>> {
    use kestrel_embed_local::{LocalEmbedder, ModelFiles};
    use kestrel_model_store::ModelStore;

    let dir = std::env::var_os("KESTREL_TEST_MINILM_DIR").filter(|d| !d.is_empty())?;
    let dir = std::path::PathBuf::from(dir);
    let files = if dir.join("model.safetensors").is_file() {
        ModelFiles::in_dir(&dir)
    } else {
        ModelFiles::from_store(&ModelStore::new(&dir)).unwrap_or_else(|e| {
            panic!(
                "KESTREL_TEST_MINILM_DIR={} holds neither model.safetensors nor a pulled model: {e}",
                dir.display()
            )
        })
    };
    Some(Arc::new(LocalEmbedder::from_files(files)))
}
