//! Working memory: the template shared by a resource's threads, the schema per thread with
//! invalid updates refused, and its tool offered only to runs with a thread.

use std::sync::Arc;

use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::{Memory, UPDATE_WORKING_MEMORY, WorkingMemory, WorkingMemoryScope};
use kestrel_storage::Scope;
use kestrel_storage::testing::Store;
use serde_json::{Value, json};

use super::{agent, on, system_text};

/// Template working memory in resource scope: updated by the tool in one thread, seen in the
/// resource's other threads, not by another resource.
pub(super) async fn working_memory_template_is_shared_by_the_resource_threads(store: Store) {
    let template = "# User\n- Name:\n- City:";
    let memory = Memory::builder()
        .storage(store.clone())
        .working_memory(WorkingMemory::template(template))
        .build()
        .unwrap();
    let notes = "# User\n- Name: Ada\n- City: Lisbon";
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "w1",
                UPDATE_WORKING_MEMORY,
                json!({"memory": notes}),
            ))
            .respond(ScriptedResponse::text("Nice to meet you, Ada."))
            .respond(ScriptedResponse::text("You are Ada."))
            .respond(ScriptedResponse::text("I don't know.")),
    );
    let agent = agent(&memory, model.clone());
    let tool = agent.tools().get(UPDATE_WORKING_MEMORY).unwrap();
    assert_eq!(tool.input_schema()["required"], json!(["memory"]));

    let first = agent
        .generate("I'm Ada from Lisbon.")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    assert!(!first.tool_results[0].is_error, "{:?}", first.tool_results);
    assert_eq!(first.tool_results[0].result, json!({"success": true}));
    let saved = store
        .get_working_memory(&Scope::resource("alice"))
        .await
        .unwrap();
    assert_eq!(saved.as_deref(), Some(notes));
    // Before the update, the template stood in for the empty memory.
    let system = system_text(&model.requests()[0]);
    assert!(
        system.contains(&format!("<working_memory_data>\n{template}\n")),
        "{system}"
    );

    agent
        .generate("Who am I?")
        .options(on("t2", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[2]);
    assert!(system.contains("- Name: Ada"), "{system}");
    assert!(system.contains(UPDATE_WORKING_MEMORY));

    agent
        .generate("Who am I?")
        .options(on("t3", "bob"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[3]);
    assert!(!system.contains("Ada"), "{system}");
}

/// `update_working_memory` needs a thread and a resource: a run without them is not offered
/// it (a small local model picked it for a weather question and could only fail), while the
/// agent's own tools stay. Where it is offered it is marked auxiliary.
pub(super) async fn memory_tools_are_offered_only_to_runs_with_a_thread(store: Store) {
    let memory = Memory::builder()
        .storage(store.clone())
        .working_memory(WorkingMemory::template("# User\n- Name:"))
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("Hello."))
            .respond(ScriptedResponse::text("Hello again.")),
    );
    let agent = agent(&memory, model.clone());
    agent.generate("Hi").await.unwrap();
    agent
        .generate("Hi")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let offered = |i: usize| -> Vec<String> {
        model.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(offered(0), ["echo"]);
    assert_eq!(offered(1), ["echo", UPDATE_WORKING_MEMORY]);
    // Memory's tools are marked auxiliary, so no model is ever made to call them.
    let auxiliary: Vec<bool> = model.requests()[1]
        .tools
        .iter()
        .map(|t| t.auxiliary)
        .collect();
    assert_eq!(auxiliary, [false, true]);
}

/// Schema working memory in thread scope: an update that does not match the schema is refused
/// (the model reads the error, nothing changes); a valid one is stored for this thread only.
pub(super) async fn working_memory_schema_is_per_thread_and_rejects_invalid_updates(store: Store) {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0}
        },
        "required": ["name"],
        "additionalProperties": false
    });
    let memory = Memory::builder()
        .storage(store.clone())
        .working_memory(WorkingMemory::schema(schema.clone()).scope(WorkingMemoryScope::Thread))
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "w1",
                UPDATE_WORKING_MEMORY,
                json!({"name": "Ada", "age": "old"}),
            ))
            .respond(ScriptedResponse::tool_call(
                "w2",
                UPDATE_WORKING_MEMORY,
                json!({"name": "Ada", "age": 36}),
            ))
            .respond(ScriptedResponse::text("Noted."))
            .respond(ScriptedResponse::text("You are Ada, 36."))
            .respond(ScriptedResponse::text("I don't know.")),
    );
    let agent = agent(&memory, model.clone());
    assert_eq!(
        agent
            .tools()
            .get(UPDATE_WORKING_MEMORY)
            .unwrap()
            .input_schema(),
        &schema
    );
    let thread = Scope::thread("t1", "alice");

    let result = agent
        .generate("I'm Ada, 36.")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let outcomes: Vec<bool> = result.tool_results.iter().map(|r| r.is_error).collect();
    assert_eq!(outcomes, [true, false], "{:?}", result.tool_results);
    assert!(
        result.tool_results[0]
            .result
            .as_str()
            .unwrap()
            .contains("age"),
        "{:?}",
        result.tool_results[0]
    );
    let saved = store.get_working_memory(&thread).await.unwrap().unwrap();
    let saved: Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(saved, json!({"name": "Ada", "age": 36}));

    agent
        .generate("Who am I?")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[3]);
    assert!(system.contains(r#""name":"Ada""#), "{system}");
    assert!(system.contains("<working_memory_schema>"), "{system}");

    agent
        .generate("Who am I?")
        .options(on("t2", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[4]);
    assert!(
        system.contains("<working_memory_data>\n{}\n"),
        "another thread starts empty: {system}"
    );
    assert_eq!(
        store
            .get_working_memory(&Scope::resource("alice"))
            .await
            .unwrap(),
        None
    );
}
