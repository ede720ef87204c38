//! Thread titles: generated once in the background by a slow or failing model, never delaying
//! or failing the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kestrel_core::model::{ModelError, ScriptedModel, ScriptedResponse};
use kestrel_memory::{GenerateTitle, Memory};
use kestrel_storage::testing::Store;

use super::{agent, eventually, on};

/// The title comes from a slow model in the background: the response does not wait for it, it
/// is stored once, and a later run does not ask again.
pub(super) async fn titles_are_generated_once_without_delaying_the_response(store: Store) {
    let title_delay = Duration::from_secs(2);
    let title_model = Arc::new(
        ScriptedModel::new()
            .with_model_id("titles")
            .respond(ScriptedResponse::text("\"Weather in Lisbon\"").with_delay(title_delay)),
    );
    let memory = Memory::builder()
        .storage(store.clone())
        .generate_title(GenerateTitle::new(title_model.clone()).instructions("Title it."))
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("Sunny."))
            .respond(ScriptedResponse::text("Still sunny.")),
    );
    let agent = agent(&memory, model);

    let start = Instant::now();
    agent
        .generate("What's the weather in Lisbon?")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let took = start.elapsed();
    assert!(
        took < title_delay / 2,
        "the response waited for the title ({took:?})"
    );
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(thread.title, None, "the title model is still thinking");

    eventually("the title", || {
        let store = store.clone();
        async move {
            let thread = store.get_thread("t1").await.unwrap().unwrap();
            thread.title.as_deref() == Some("Weather in Lisbon")
        }
    })
    .await;
    let request = &title_model.requests()[0];
    assert_eq!(request.messages[0].text(), "Title it.");
    assert_eq!(request.messages[1].text(), "What's the weather in Lisbon?");

    agent
        .generate("And now?")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        title_model.calls(),
        1,
        "a titled thread is not titled again"
    );
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(thread.title.as_deref(), Some("Weather in Lisbon"));
}

/// A title model that fails leaves the thread untitled and the run successful.
pub(super) async fn a_failing_title_model_is_not_fatal(store: Store) {
    let failure = ModelError::BadRequest {
        provider: "scripted".into(),
        status: 400,
        message: "no".into(),
    };
    let title_model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::error(failure)));
    let memory = Memory::builder()
        .storage(store.clone())
        .generate_title(GenerateTitle::new(title_model.clone()))
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("Hi.")));
    let result = agent(&memory, model)
        .generate("Hello")
        .options(on("t1", "alice"))
        .await;
    assert_eq!(result.unwrap().text, "Hi.");
    eventually("the title attempt", || {
        let calls = title_model.calls();
        async move { calls == 1 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(thread.title, None);
}
