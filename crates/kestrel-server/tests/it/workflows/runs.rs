//! Describing workflows, and runs that start, stream, suspend, resume and cancel.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::{error_of, schema, serve, types};

#[tokio::test]
async fn workflows_are_listed_and_described_as_mastra_does() {
    let f = serve(|s| s).await;
    let all = f.ok(f.get("/workflows").await).await;
    let mut ids: Vec<&String> = all.as_object().unwrap().keys().collect();
    ids.sort();
    assert_eq!(ids, ["batch", "gate", "numbers", "slow", "wrapped"]);
    let numbers = f.ok(f.get("/workflows/numbers").await).await;
    assert_eq!(numbers["name"], "numbers");
    assert_eq!(numbers["description"], "Adds and multiplies");
    // Schemas are JSON strings of `{"json": schema}`, as Mastra (superjson) gives them.
    assert_eq!(schema(&numbers["inputSchema"])["required"], json!(["v"]));
    assert_eq!(numbers["steps"]["s1"]["description"], "Adds one");
    assert_eq!(
        schema(&numbers["steps"]["sum"]["inputSchema"])["required"],
        json!(["a", "b"])
    );
    let graph: Vec<&str> = numbers["stepGraph"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(graph, ["step", "parallel", "step"]);
    assert_eq!(numbers["stepGraph"][1]["steps"][1]["step"]["id"], "b");
    let gate = f.ok(f.get("/workflows/gate").await).await;
    assert_eq!(
        schema(&gate["steps"]["ask"]["resumeSchema"])["required"],
        json!(["approved"])
    );
    assert_eq!(gate["stepGraph"][0]["step"]["canSuspend"], true);
    let partial = f.ok(f.get("/workflows?partial=true").await).await;
    assert_eq!(partial["numbers"]["stepCount"], 4);
    assert_eq!(partial["numbers"]["steps"], json!({}));
    let missing = error_of(f.get("/workflows/ghost").await, 404, "not_found").await;
    assert!(missing.contains("ghost"), "{missing}");
}

#[tokio::test]
async fn a_created_run_streams_in_mastras_record_format_and_starts_once() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("numbers").await;
    let pending = f
        .ok(f.get(&format!("/workflows/numbers/runs/{run_id}")).await)
        .await;
    assert_eq!(pending["status"], "pending");
    let events = f
        .stream(
            &format!("/workflows/numbers/stream?runId={run_id}"),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    assert_eq!(
        types(&events),
        [
            "workflow-start",
            "workflow-step-start",
            "workflow-step-result",
            "workflow-step-start",
            "workflow-step-start",
            "workflow-step-result",
            "workflow-step-result",
            "workflow-step-start",
            "workflow-step-result",
            "workflow-finish",
        ]
    );
    for event in &events {
        assert_eq!(event["runId"], run_id.as_str());
        assert_eq!(event["from"], "WORKFLOW");
    }
    let finish = events.last().unwrap();
    assert_eq!(finish["payload"]["workflowStatus"], "success");
    // s1: 2; a: 4, b: 6; sum: 10.
    assert_eq!(events[8]["payload"]["output"], json!({"v": 10}));
    let run = f
        .ok(f.get(&format!("/workflows/numbers/runs/{run_id}")).await)
        .await;
    assert_eq!(run["status"], "success");
    assert_eq!(run["result"], json!({"v": 10}));
    assert_eq!(run["payload"], json!({"v": 1}));
    assert_eq!(run["steps"]["b"]["output"], json!({"v": 6}));
    assert!(run["createdAt"].as_str().unwrap().ends_with('Z'), "{run}");
    // A run starts once: a second start of the same id is a conflict.
    let again = f
        .post(
            &format!("/workflows/numbers/stream?runId={run_id}"),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    error_of(again, 409, "already_started").await;
}

#[tokio::test]
async fn start_async_answers_with_the_result_and_start_does_not_wait() {
    let f = serve(|s| s).await;
    let result = f
        .ok(f
            .post(
                "/workflows/numbers/start-async",
                json!({"inputData": {"v": 2}}),
            )
            .await)
        .await;
    assert_eq!(result["status"], "success");
    assert_eq!(result["result"], json!({"v": 15}));
    assert_eq!(result["steps"]["s1"]["output"], json!({"v": 3}));
    let run_id = f.create_run("slow").await;
    let started = f
        .ok(f
            .post(
                &format!("/workflows/slow/start?runId={run_id}"),
                json!({"inputData": {"v": 1}}),
            )
            .await)
        .await;
    assert_eq!(started["message"], "Workflow run started");
    f.wait_for("slow", &run_id, "running").await;
    let counts = f.ok(f.get("/workflows/run-counts").await).await;
    assert_eq!(counts["slow"], json!({"running": 1, "suspended": 0}));
    // A run in progress is not deleted from under itself.
    let busy = f
        .http
        .delete(format!("{}/workflows/slow/runs/{run_id}", f.base))
        .send()
        .await
        .unwrap();
    error_of(busy, 409, "run_in_progress").await;
    // Canceling it reaches the run going on (through its abort signal).
    let canceled = f
        .ok(f
            .post(&format!("/workflows/slow/runs/{run_id}/cancel"), json!({}))
            .await)
        .await;
    assert_eq!(canceled["message"], "Workflow run cancelled");
    f.wait_for("slow", &run_id, "canceled").await;
    let again = f
        .post(&format!("/workflows/slow/runs/{run_id}/cancel"), json!({}))
        .await;
    error_of(again, 409, "run_ended").await;
    let fields = f
        .ok(f
            .get(&format!("/workflows/slow/runs/{run_id}?fields=payload"))
            .await)
        .await;
    assert_eq!(fields["payload"], json!({"v": 1}));
    assert!(
        fields.get("steps").is_none(),
        "only the fields asked for: {fields}"
    );
    let deleted = f
        .http
        .delete(format!("{}/workflows/slow/runs/{run_id}", f.base))
        .send()
        .await
        .unwrap();
    assert_eq!(f.ok(deleted).await["message"], "Workflow run deleted");
    error_of(
        f.get(&format!("/workflows/slow/runs/{run_id}")).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_suspended_run_is_resumed_once_with_checked_data() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("gate").await;
    let events = f
        .stream(
            &format!("/workflows/gate/stream?runId={run_id}"),
            json!({"inputData": {"v": 7}}),
        )
        .await;
    assert_eq!(
        types(&events),
        [
            "workflow-start",
            "workflow-step-start",
            "workflow-step-suspended",
            "workflow-finish"
        ]
    );
    assert_eq!(
        events[2]["payload"]["suspendPayload"],
        json!({"question": "approve?"})
    );
    assert_eq!(events[3]["payload"]["workflowStatus"], "suspended");
    let listed = f
        .ok(f.get("/workflows/gate/runs?status=suspended").await)
        .await;
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["runs"][0]["runId"], run_id.as_str());
    assert_eq!(
        listed["runs"][0]["snapshot"]["suspendedPaths"],
        json!({"ask": [0]})
    );
    assert_eq!(
        listed["runs"][0]["snapshot"]["context"]["input"],
        json!({"v": 7})
    );
    let resume = format!("/workflows/gate/resume-async?runId={run_id}");
    let bad = f
        .post(
            &resume,
            json!({"step": "ask", "resumeData": {"approved": "yes"}}),
        )
        .await;
    let message = error_of(bad, 422, "invalid_resume_data").await;
    assert!(message.contains("approved"), "{message}");
    let wrong = f
        .post(
            &resume,
            json!({"step": "after", "resumeData": {"approved": true}}),
        )
        .await;
    error_of(wrong, 409, "not_suspended_step").await;
    // Two resumers at once: one runs the rest, the other is told it lost.
    let body = json!({"step": ["ask"], "resumeData": {"approved": true}});
    let (one, two) = tokio::join!(f.post(&resume, body.clone()), f.post(&resume, body.clone()));
    let mut statuses = [one.status().as_u16(), two.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409]);
    let run = f.wait_for("gate", &run_id, "success").await;
    assert_eq!(run["result"], json!({"done": true, "v": 7}));
    assert_eq!(
        run["steps"]["ask"]["resumePayload"],
        json!({"approved": true})
    );
    error_of(f.post(&resume, body).await, 409, "not_suspended").await;
}

#[tokio::test]
async fn resume_stream_streams_the_rest_and_the_background_forms_answer_at_once() {
    let f = serve(|s| s).await;
    let first = f.suspended_gate(1).await;
    let events = f
        .stream(
            &format!("/workflows/gate/resume-stream?runId={first}"),
            json!({"resumeData": {"approved": false}}),
        )
        .await;
    let kinds = types(&events);
    assert_eq!(kinds.first(), Some(&"workflow-start"));
    assert_eq!(kinds.last(), Some(&"workflow-finish"));
    let resumed = events
        .iter()
        .find(|e| e["type"] == "workflow-step-start")
        .unwrap();
    assert_eq!(
        resumed["payload"]["resumePayload"],
        json!({"approved": false})
    );
    assert_eq!(
        events.last().unwrap()["payload"]["workflowStatus"],
        "success"
    );
    let second = f.suspended_gate(2).await;
    let no_wait = f
        .ok(f
            .post(
                &format!("/workflows/gate/resume-no-wait?runId={second}"),
                json!({"resumeData": {"approved": true}}),
            )
            .await)
        .await;
    assert_eq!(no_wait["runId"], second.as_str());
    f.wait_for("gate", &second, "success").await;
    // A suspended run can be canceled too.
    let third = f.suspended_gate(3).await;
    f.ok(f
        .post(&format!("/workflows/gate/runs/{third}/cancel"), json!({}))
        .await)
        .await;
    f.wait_for("gate", &third, "canceled").await;
    let resume = f
        .post(
            &format!("/workflows/gate/resume?runId={third}"),
            json!({"resumeData": {"approved": true}}),
        )
        .await;
    error_of(resume, 409, "not_suspended").await;
}
