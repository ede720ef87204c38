//! Reflection: past `observation_tokens` the reflector condenses the observations.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::observational::REFLECTOR_INSTRUCTIONS;
use kestrel_memory::{Memory, ObservationalMemory, count_tokens};
use kestrel_storage::Scope;
use kestrel_storage::testing::Store;

use super::{agent, noting_model, observation_texts, on, settle, system_text};

/// Past `observation_tokens` the reflector (its own model here) rewrites the observations; its
/// request has the same shape; the next run sees only the condensed log.
pub(super) async fn reflection_condenses_observations_past_observation_tokens(store: Store) {
    let line =
        "User is planning a long trip to Lisbon and Porto in May with two children and a dog.";
    let observer = Arc::new(ScriptedModel::from_fn(move |_| {
        ScriptedResponse::text(format!("- 2026-05-01 14:05 {line}"))
    }));
    let reflector = Arc::new(ScriptedModel::from_fn(|_| {
        ScriptedResponse::text(
            "Condensed log:\n- 2026-05-02 09:00 User plans a May trip to Portugal with family.",
        )
    }));
    let rendered = count_tokens(&format!("- 2026-05-01 14:05 {line}"));
    let options = ObservationalMemory::new(observer.clone())
        .reflector_model(reflector.clone())
        .message_tokens(1)
        .observation_tokens(rendered * 3 / 2);
    let progress = options.progress();
    let memory = Memory::builder()
        .storage(store.clone())
        .observational_memory(options)
        .build()
        .unwrap();
    let model = noting_model();
    let agent = agent(&memory, model.clone());
    let log = Scope::thread("t1", "alice");

    agent
        .generate("Hello.")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    settle(&progress, 1).await;
    assert_eq!(observer.calls(), 1);
    assert_eq!(
        reflector.calls(),
        0,
        "one observation is below the threshold"
    );
    assert_eq!(observation_texts(&store, &log).await, [line]);

    agent
        .generate("More.")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    settle(&progress, 2).await;
    assert_eq!(observer.calls(), 2);
    assert_eq!(reflector.calls(), 1, "two observations pass the threshold");
    let request = &reflector.requests()[0];
    assert_eq!(request.messages.len(), 2);
    assert_eq!(request.messages[0].role, Role::System);
    assert!(
        request.messages[0]
            .text()
            .starts_with(REFLECTOR_INSTRUCTIONS)
    );
    assert_eq!(request.messages[1].role, Role::User);
    assert_eq!(
        request.messages[1].text(),
        format!(
            "<observations>\n- 2026-05-01 14:05 {line}\n- 2026-05-01 14:05 {line}\n</observations>"
        )
    );
    let observations = store.list_observations(&log).await.unwrap();
    assert_eq!(observations.len(), 1);
    assert_eq!(
        observations[0].text,
        "User plans a May trip to Portugal with family."
    );
    assert_eq!(
        observations[0].created_at,
        Utc.with_ymd_and_hms(2026, 5, 2, 9, 0, 0).unwrap()
    );
    assert_eq!(observations[0].observed_up_to_seq, Some(4));

    agent
        .generate("Where am I going?")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[2]);
    assert!(system.contains("- 2026-05-02 09:00 User plans a May trip to Portugal with family."));
    assert!(
        !system.contains(line),
        "the reflected observations are gone"
    );
    settle(&progress, 3).await;
}
