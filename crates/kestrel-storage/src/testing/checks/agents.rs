//! The checks of stored agents and their versions: creation, numbering, publishing, the
//! published version's protection, another agent's versions, deletion and concurrent versions.

use std::sync::Arc;

use serde_json::json;

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{NewAgentVersion, NewStoredAgent};

fn version(instructions: &str) -> NewAgentVersion {
    NewAgentVersion {
        config: json!({"instructions": instructions, "tools": ["get_weather"], "defaultOptions": {"maxSteps": 3}}),
        changed_fields: vec!["instructions".into()],
        change_message: Some(format!("set {instructions}")),
    }
}

/// Versions number from 1, the published one is protected, and every error names its agent.
pub async fn stored_agents_versions_lifecycle(store: Arc<dyn Storage>) {
    let (agent, first) = store
        .create_stored_agent(NewStoredAgent {
            id: "writer".into(),
            metadata: super::helpers::meta(json!({"team": "docs"})),
            version: version("v1"),
            publish: true,
        })
        .await
        .unwrap();
    assert_eq!(agent.id, "writer");
    assert_eq!(agent.active_version_id.as_deref(), Some(first.id.as_str()));
    assert_eq!(agent.metadata["team"], "docs");
    assert_eq!(first.version_number, 1);
    assert_eq!(first.config["defaultOptions"]["maxSteps"], 3);
    assert_eq!(first.changed_fields, ["instructions"]);
    assert_eq!(first.change_message.as_deref(), Some("set v1"));
    let taken = store
        .create_stored_agent(NewStoredAgent {
            id: "writer".into(),
            ..NewStoredAgent::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(taken, StorageError::AgentExists { .. }),
        "{taken:?}"
    );

    let second = store
        .add_agent_version("writer", version("v2"))
        .await
        .unwrap();
    assert_eq!(second.version_number, 2);
    let numbers: Vec<i64> = store
        .list_agent_versions("writer")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version_number)
        .collect();
    assert_eq!(numbers, [2, 1]);
    assert_eq!(
        store.get_agent_version("writer", &second.id).await.unwrap(),
        second
    );
    // A draft does not move the published version.
    let stored = store.get_stored_agent("writer").await.unwrap().unwrap();
    assert_eq!(stored.active_version_id.as_deref(), Some(first.id.as_str()));

    store
        .create_stored_agent(NewStoredAgent {
            id: "editor".into(),
            version: version("e1"),
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    for err in [
        store
            .get_agent_version("editor", &second.id)
            .await
            .unwrap_err(),
        store
            .activate_agent_version("editor", Some(&second.id))
            .await
            .unwrap_err(),
        store.get_agent_version("writer", "nope").await.unwrap_err(),
    ] {
        assert!(
            matches!(err, StorageError::VersionNotFound { .. }),
            "{err:?}"
        );
    }
    for err in [
        store
            .add_agent_version("ghost", version("x"))
            .await
            .unwrap_err(),
        store.list_agent_versions("ghost").await.unwrap_err(),
        store
            .activate_agent_version("ghost", None)
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, StorageError::AgentNotFound { .. }), "{err:?}");
    }

    let published = store
        .activate_agent_version("writer", Some(&second.id))
        .await
        .unwrap();
    assert_eq!(
        published.active_version_id.as_deref(),
        Some(second.id.as_str())
    );
    let err = store
        .delete_agent_version("writer", &second.id)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StorageError::VersionPublished { .. }),
        "{err:?}"
    );
    store
        .delete_agent_version("writer", &first.id)
        .await
        .unwrap();
    let left: Vec<i64> = store
        .list_agent_versions("writer")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version_number)
        .collect();
    assert_eq!(left, [2]);
    // Numbers are never reused.
    let third = store
        .add_agent_version("writer", version("v3"))
        .await
        .unwrap();
    assert_eq!(third.version_number, 3);
    let unpublished = store.activate_agent_version("writer", None).await.unwrap();
    assert_eq!(unpublished.active_version_id, None);

    let ids: Vec<String> = store
        .list_stored_agents()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(ids, ["editor", "writer"]);
    assert!(store.delete_stored_agent("writer").await.unwrap());
    assert!(!store.delete_stored_agent("writer").await.unwrap());
    assert!(store.get_stored_agent("writer").await.unwrap().is_none());
    let gone = store
        .get_agent_version("writer", &third.id)
        .await
        .unwrap_err();
    assert!(
        matches!(gone, StorageError::VersionNotFound { .. }),
        "{gone:?}"
    );
}

/// Versions added at once get distinct, consecutive numbers.
pub async fn stored_agents_concurrent_versions(store: Arc<dyn Storage>) {
    store
        .create_stored_agent(NewStoredAgent {
            id: "busy".into(),
            version: version("v1"),
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    let adds = (0..8).map(|n| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .add_agent_version("busy", version(&format!("c{n}")))
                .await
                .unwrap()
                .version_number
        })
    });
    let mut numbers = Vec::new();
    for add in adds {
        numbers.push(add.await.unwrap());
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (2..=9).collect::<Vec<i64>>());
}
