//! Skills over HTTP: agent descriptions list them, `GET /agents/{id}/skills/{name}` gives one
//! whole in Mastra's shape, and unknown agents or skills are 404s.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::ScriptedModel;
use kestrel_core::skill::{Skill, create_skill};
use kestrel_server::Server;
use serde_json::{Value, json};

async fn serve(kestrel: Kestrel) -> String {
    let server = Server::new(kestrel);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}/api")
}

#[tokio::test]
async fn agents_list_their_skills_and_a_skill_is_described_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("triage");
    std::fs::create_dir_all(root.join("references")).unwrap();
    std::fs::write(
        root.join("SKILL.md"),
        "---\nname: triage\ndescription: Sorts bug reports.\nlicense: MIT\n---\nAsk for steps.\n",
    )
    .unwrap();
    std::fs::write(root.join("references/labels.md"), "bug, feature\n").unwrap();
    let agent = Agent::builder("support")
        .model(Arc::new(ScriptedModel::new()))
        .skills([
            Skill::from_dir(&root).unwrap(),
            create_skill("apology", "Apologises well.", "Be sincere.")
                .metadata("tone", "warm")
                .build()
                .unwrap(),
        ])
        .build()
        .unwrap();
    let plain = Agent::builder("plain")
        .model(Arc::new(ScriptedModel::new()))
        .build()
        .unwrap();
    let base = serve(
        Kestrel::builder()
            .agent(agent)
            .agent(plain)
            .build()
            .unwrap(),
    )
    .await;
    let http = reqwest::Client::new();

    let get = |path: &str| {
        let request = http.get(format!("{base}{path}"));
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let agents = get("/agents").await;
    assert_eq!(
        agents["support"]["skills"],
        json!([
            {"name": "apology", "description": "Apologises well.", "metadata": {"tone": "warm"}, "path": "inline/apology"},
            {"name": "triage", "description": "Sorts bug reports.", "license": "MIT", "path": root.display().to_string()},
        ])
    );
    assert_eq!(agents["plain"]["skills"], json!([]));
    assert!(agents["support"]["tools"]["skill_read"].is_object());

    let skill = get("/agents/support/skills/triage").await;
    assert_eq!(
        skill,
        json!({
            "name": "triage",
            "description": "Sorts bug reports.",
            "license": "MIT",
            "path": root.display().to_string(),
            "instructions": "Ask for steps.",
            "source": {"type": "local", "projectPath": root.display().to_string()},
            "references": ["references/labels.md"],
            "scripts": [],
            "assets": [],
        })
    );

    for (path, needle) in [
        ("/agents/support/skills/nope", "no skill is named \"nope\""),
        (
            "/agents/plain/skills/triage",
            "no skill is named \"triage\"",
        ),
        ("/agents/ghost/skills/triage", "ghost"),
    ] {
        let response = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{path}: {message}");
    }
}
