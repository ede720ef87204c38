//! What the document says across operations: the answers some routes give besides the ones
//! every route documents, and the OpenAPI links from one operation's answer to the requests
//! that follow it.

use serde_json::{Map, Value, json};

use super::document::{error_response, operation_id};

/// Answers some operations give besides the ones every operation documents: 409 when the
/// run, call or thread is not in a state for the request (a call already decided, a busy
/// thread, a run id taken, a thread that exists, working memory that is off), 403 for a tool
/// that runs only inside a run, 204 when a chat has no running turn to re-attach to.
pub(super) fn add_statuses(doc: &mut Value) {
    const CONFLICT: &str = "The run, tool call or thread is not in a state for this request";
    let conflicts = [
        GENERATE,
        STREAM,
        APPROVE,
        DECLINE,
        APPROVE_GENERATE,
        DECLINE_GENERATE,
        RESUME_STREAM,
        ABORT_RUN,
        RESUME_RUN,
        SEND_MESSAGE,
        SIGNALS,
        CREATE_THREAD,
        ("post", WORKING_MEMORY),
        CHAT,
        CHAT_STREAM,
    ];
    let mut statuses: Vec<(Op, &str, Value)> = conflicts
        .into_iter()
        .map(|op| (op, "409", error_response(CONFLICT)))
        .collect();
    statuses.push((
        EXECUTE_TOOL,
        "403",
        error_response(
            "The tool runs only inside a run (it needs approval, is a client tool, reads the \
             conversation or suspends)",
        ),
    ));
    statuses.push((
        ("patch", "/api/memory/threads/{thread_id}"),
        "409",
        error_response("The body names another resource: threads do not move"),
    ));
    statuses.push((
        CHAT_STREAM,
        "204",
        json!({"description": "No turn of this chat is running"}),
    ));
    for (op, status, response) in statuses {
        if let Some(responses) = responses_mut(doc, op) {
            responses.insert(status.to_owned(), response);
        }
    }
}

/// The responses of the operation `op` in `doc`, if it is there.
fn responses_mut(doc: &mut Value, (method, path): Op) -> Option<&mut Map<String, Value>> {
    let path = path.replace('~', "~0").replace('/', "~1");
    doc.pointer_mut(&format!("/paths/{path}/{method}/responses"))?
        .as_object_mut()
}

/// An operation named by its method and documented path.
type Op = (&'static str, &'static str);

const GENERATE: Op = ("post", "/api/agents/{agent_id}/generate");
const STREAM: Op = ("post", "/api/agents/{agent_id}/stream");
const APPROVE: Op = ("post", "/api/agents/{agent_id}/approve-tool-call");
const DECLINE: Op = ("post", "/api/agents/{agent_id}/decline-tool-call");
const APPROVE_GENERATE: Op = ("post", "/api/agents/{agent_id}/approve-tool-call-generate");
const DECLINE_GENERATE: Op = ("post", "/api/agents/{agent_id}/decline-tool-call-generate");
const RESUME_STREAM: Op = ("post", "/api/agents/{agent_id}/resume-stream");
const SUSPENDED_RUNS: Op = ("get", "/api/agents/{agent_id}/suspended-runs");
const ABORT_RUN: Op = ("post", "/api/agents/{agent_id}/runs/{run_id}/abort");
const RESUME_RUN: Op = ("post", "/api/agents/{agent_id}/runs/{run_id}/resume");
const SEND_MESSAGE: Op = ("post", "/api/agents/{agent_id}/send-message");
const SIGNALS: Op = ("post", "/api/agents/{agent_id}/signals");
const ABORT_THREAD: Op = ("post", "/api/agents/{agent_id}/threads/abort");
const SUBSCRIBE: Op = ("post", "/api/agents/{agent_id}/threads/subscribe");
const THREADS: Op = ("get", "/api/memory/threads");
const CREATE_THREAD: Op = ("post", "/api/memory/threads");
const THREAD: &str = "/api/memory/threads/{thread_id}";
const MESSAGES: Op = ("get", "/api/memory/threads/{thread_id}/messages");
const WORKING_MEMORY: &str = "/api/memory/threads/{thread_id}/working-memory";
const OBSERVATIONS: Op = ("get", "/api/memory/observational-memory");
const CHAT: Op = ("post", "/chat/{agent_id}");
const CHAT_MESSAGES: Op = ("get", "/chat/{agent_id}/{chat_id}/messages");
const CHAT_STREAM: Op = ("get", "/chat/{agent_id}/{chat_id}/stream");
const EXECUTE_TOOL: Op = ("post", "/api/agents/{agent_id}/tools/{tool_id}/execute");

/// One OpenAPI link: a value of an answer that feeds a parameter or a body field of a next
/// request.
struct Link {
    from: Op,
    status: &'static str,
    name: &'static str,
    to: Op,
    /// Target parameters (`path.run_id`, `query.resourceId`) and their runtime expressions.
    parameters: Value,
    /// Body fields (with runtime expressions for values) merged into the target's body.
    body: Option<Value>,
}

/// The links between operations: the run a `generate` (or the waiting-runs list) stopped feeds
/// the decisions, resumes and aborts of that run; a created (or listed) thread feeds the thread
/// routes, runs on that thread and its chat. Clients that follow links, and Schemathesis'
/// stateful tests (`.ci/fuzz`), reach real runs, threads and decisions through them.
fn links() -> Vec<Link> {
    let same_agent = || json!({"path.agent_id": "$request.path.agent_id"});
    let mut links = Vec::new();
    // A run that stopped: from `generate` (and the decisions, which continue it and may stop
    // again) its first waiting call; from `suspended-runs` the first waiting run's.
    let stopped = [
        (GENERATE, "/runId", "/suspended/0"),
        (APPROVE_GENERATE, "/runId", "/suspended/0"),
        (DECLINE_GENERATE, "/runId", "/suspended/0"),
        (SUSPENDED_RUNS, "/runs/0/runId", "/runs/0/toolCalls/0"),
    ];
    for (from, run, call) in stopped {
        let status = "200";
        let run = format!("$response.body#{run}");
        // The call's fingerprint too: a decision naming another is refused.
        let decision = json!({
            "runId": run,
            "toolCallId": format!("$response.body#{call}/toolCallId"),
            "fingerprint": format!("$response.body#{call}/fingerprint"),
        });
        for (name, to) in [
            ("approve", APPROVE),
            ("decline", DECLINE),
            ("approveGenerate", APPROVE_GENERATE),
            ("declineGenerate", DECLINE_GENERATE),
            ("resumeStream", RESUME_STREAM),
        ] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: same_agent(),
                body: Some(decision.clone()),
            });
        }
        for (name, to) in [("abortRun", ABORT_RUN), ("resumeRun", RESUME_RUN)] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({"path.agent_id": "$request.path.agent_id", "path.run_id": &run}),
                body: None,
            });
        }
    }
    // A decision taken twice: the second finds the call decided.
    for from in [APPROVE_GENERATE, DECLINE_GENERATE] {
        links.push(Link {
            from,
            status: "200",
            name: "decideAgain",
            to: DECLINE_GENERATE,
            parameters: same_agent(),
            body: Some(json!({
                "runId": "$request.body#/runId",
                "toolCallId": "$request.body#/toolCallId",
                "fingerprint": "$request.body#/fingerprint",
            })),
        });
    }
    // A thread: created, or the first of a list.
    for (from, status, id, resource) in [
        (
            CREATE_THREAD,
            "201",
            "$response.body#/id",
            "$response.body#/resourceId",
        ),
        (
            THREADS,
            "200",
            "$response.body#/threads/0/id",
            "$response.body#/threads/0/resourceId",
        ),
    ] {
        let thread = json!({"path.thread_id": id, "query.resourceId": resource});
        for (name, to) in [
            ("getThread", ("get", THREAD)),
            ("updateThread", ("patch", THREAD)),
            ("deleteThread", ("delete", THREAD)),
            ("messages", MESSAGES),
            ("getWorkingMemory", ("get", WORKING_MEMORY)),
            ("setWorkingMemory", ("post", WORKING_MEMORY)),
        ] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: thread.clone(),
                body: None,
            });
        }
        links.push(Link {
            from,
            status,
            name: "observations",
            to: OBSERVATIONS,
            parameters: json!({"query.threadId": id, "query.resourceId": resource}),
            body: None,
        });
        for (name, to) in [("generate", GENERATE), ("stream", STREAM)] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({}),
                body: Some(json!({"memory": {"thread": id, "resource": resource}})),
            });
        }
        for (name, to) in [
            ("sendMessage", SEND_MESSAGE),
            ("signal", SIGNALS),
            ("abortThread", ABORT_THREAD),
            ("subscribe", SUBSCRIBE),
        ] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({}),
                body: Some(json!({"resourceId": resource, "threadId": id})),
            });
        }
        links.push(Link {
            from,
            status,
            name: "chat",
            to: CHAT,
            parameters: json!({}),
            body: Some(json!({"id": id, "resourceId": resource})),
        });
        for (name, to) in [("chatMessages", CHAT_MESSAGES), ("chatStream", CHAT_STREAM)] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({"path.chat_id": id}),
                body: None,
            });
        }
    }
    links
}

/// Adds [`links`] to the responses of `doc`, naming their targets by operation id; a link
/// whose operations or response are not in the document is left out.
pub(super) fn add_links(doc: &mut Value) {
    for link in links() {
        let (target_method, target_path) = link.to;
        if responses_mut(doc, link.to).is_none() {
            continue;
        }
        let Some(response) = responses_mut(doc, link.from)
            .and_then(|responses| responses.get_mut(link.status))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let mut definition = json!({
            "operationId": operation_id(target_method, target_path),
            "parameters": link.parameters,
        });
        if let Some(body) = link.body {
            definition["requestBody"] = body;
        }
        if let Some(links) = response
            .entry("links")
            .or_insert_with(|| json!({}))
            .as_object_mut()
        {
            links.insert(link.name.to_owned(), definition);
        }
    }
}
