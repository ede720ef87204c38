//! The server the API fuzzer (`.ci/fuzz`, Schemathesis) runs against: every route backed by
//! something real, on scripted models that answer forever.
//!
//! `cargo run -p kestrel-server --example fuzz_target -- [PORT]` serves on 127.0.0.1 (port 0,
//! the default, picks a free one) and prints `listening on http://ADDR` once it accepts
//! connections. It runs until SIGINT or SIGTERM, then removes its database.
//!
//! - **`assistant`** has a plain tool (`get_weather`), a tool that needs a person's approval
//!   (`send_email`) and a tool that suspends for resume data (`book_table`). Its model answers
//!   as a function of the request, never running out: on the first step of a turn it calls
//!   `send_email` when the prompt asks to email or approve something, `book_table` when it asks
//!   to book or resume, `get_weather` when it asks about the weather, and otherwise answers
//!   text; after a tool result it answers text. So runs stop for people, and the approve,
//!   decline, resume and suspended-runs routes have real runs to act on.
//! - **`supervisor`** delegates every prompt to its sub-agent **`research`** (the assistant's
//!   model and tools; also registered on its own), so an approval inside the sub-agent stops
//!   the supervisor and is decided with the supervisor's run id.
//! - Memory (threads, working memory, observations) and the stopped runs live in SQLite in a
//!   temporary directory, so the thread routes and stored runs work as they do in production.
//! - An in-memory vector store **`default`** holds the index **`docs`** (dimension 3, cosine)
//!   with a few vectors, so the vector routes query, upsert into and describe a real index;
//!   the embedder `hash/hash-3` is listed at `/api/embedders`.
//!
//! Logs go to stderr (`RUST_LOG`, `warn` by default): a 5xx the fuzzer finds names its cause
//! there.

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::embedding::HashEmbedder;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{
    ModelRegistry, ModelRequest, ScriptedModel, ScriptedResponse, SharedModel, UnknownModel,
};
use kestrel_core::tool::{Tool, ToolError, create_tool};
use kestrel_core::workflow::{Workflow, create_step};
use kestrel_memory::{Memory, ObservationalMemory, WorkingMemory};
use kestrel_rag::{CreateIndex, InMemoryVectorStore, Upsert, VectorStore};
use kestrel_server::{ServedEmbedder, Server};
use kestrel_storage::{SqliteStorage, Storage};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

const WEATHER_TOOL: &str = "get_weather";
const EMAIL_TOOL: &str = "send_email";
const BOOKING_TOOL: &str = "book_table";

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let port: u16 = match std::env::args().nth(1) {
        Some(port) => port.parse().map_err(|e| format!("port {port:?}: {e}"))?,
        None => 0,
    };

    let dir = tempfile::tempdir()?;
    let storage: Arc<dyn Storage> =
        Arc::new(SqliteStorage::open(dir.path().join("fuzz.db")).await?);
    let memory = Memory::builder()
        .storage(storage.clone())
        .last_messages(20)
        .working_memory(WorkingMemory::template("# About the user\n- Name:\n"))
        .observational_memory(
            // Never reached in a fuzz run (a thread would need a million tokens), but the
            // observations route answers as it does with observational memory on.
            ObservationalMemory::new(model(|_| ScriptedResponse::text("")))
                .message_tokens(1_000_000)
                .recall_tool(false),
        )
        .build()?;

    let assistant = tool_agent("assistant")
        .description("Checks the weather, books tables and sends emails (with approval).")
        .memory(memory.clone())
        .build()?;
    let supervisor = Agent::builder("supervisor")
        .description("Delegates every question to its research sub-agent.")
        .instructions("Delegate to agent-research, then answer with what it found.")
        .model(model(supervise))
        .agents([tool_agent("research").build()?])
        .memory(memory.clone())
        .build()?;
    // Stored agents the fuzzer creates name models: only scripted ones resolve (no
    // provider that would call a host).
    let mut models = ModelRegistry::empty();
    models.register(
        "scripted",
        |_: &str, _: &str| -> Result<SharedModel, UnknownModel> { Ok(model(answer)) },
    );
    // The storage, given once: the instance keeps its runs, workflow runs, queued messages
    // and stored agents there, next to the memory's threads.
    let kestrel = Kestrel::builder()
        .models(models)
        .storage(storage)
        .memory(memory.clone())
        .agent(assistant)
        .agent(supervisor)
        .agent(tool_agent("research").build()?)
        .workflow(numbers_workflow()?)
        .workflow(approval_workflow()?)
        .build()?;

    let vectors = Arc::new(InMemoryVectorStore::new());
    vectors.create_index(CreateIndex::new("docs", 3)).await?;
    let mut docs = Upsert::new("docs");
    for (id, vector, kind) in [
        ("a", [1.0, 0.0, 0.0], "guide"),
        ("b", [0.0, 1.0, 0.0], "faq"),
        ("c", [0.6, 0.8, 0.0], "guide"),
    ] {
        let metadata = json!({"kind": kind, "year": 2024});
        let metadata = metadata.as_object().cloned().unwrap_or_default();
        docs = docs.vector(id, vector.to_vec(), metadata);
    }
    vectors.upsert(docs).await?;

    // The server's memory routes serve the agents' memory.
    let server = Server::new(kestrel)
        .memory(memory)
        .vector("default", vectors)
        .embedder(ServedEmbedder::new(Arc::new(HashEmbedder::new(3)), 512));
    let (listener, addr) = server
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .await?;
    println!("listening on http://{addr}");
    use std::io::Write as _;
    std::io::stdout().flush()?;

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        served = server.serve_on(listener, addr) => served?,
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    // Dropping the directory removes the database.
    drop(dir);
    Ok(())
}

#[derive(Deserialize, serde::Serialize, JsonSchema)]
struct Number {
    n: i64,
}

#[derive(Deserialize, serde::Serialize, JsonSchema)]
struct Parts {
    add: Number,
    square: Number,
}

#[derive(Deserialize, serde::Serialize, JsonSchema)]
struct Approval {
    approved: bool,
}

/// `numbers`: `double` → parallel(`add`, `square`) → `total`, on `{n}` (saturating, so no
/// input overflows).
fn numbers_workflow() -> Result<Workflow, Error> {
    let double = create_step("double").execute(|x: Number, _ctx| async move {
        Ok(Number {
            n: x.n.saturating_mul(2),
        })
    });
    let add = create_step("add").execute(|x: Number, _ctx| async move {
        Ok(Number {
            n: x.n.saturating_add(1),
        })
    });
    let square = create_step("square").execute(|x: Number, _ctx| async move {
        Ok(Number {
            n: x.n.saturating_mul(x.n),
        })
    });
    let total = create_step("total").execute(|p: Parts, _ctx| async move {
        Ok(Number {
            n: p.add.n.saturating_add(p.square.n),
        })
    });
    Ok(Workflow::builder("numbers")
        .description("Doubles n, then adds one to it and squares it at once, and sums them")
        .then(double)
        .parallel([add, square])
        .then(total)
        .commit()?)
}

/// `approval`: `ask` suspends for `{approved}`, then `finish` says what was decided.
fn approval_workflow() -> Result<Workflow, Error> {
    let ask = create_step("ask")
        .resume_type::<Approval>()
        .execute(|x: Number, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"question": format!("Approve {}?", x.n)}))),
                Some(data) => Ok(json!({"n": x.n, "approved": data["approved"]})),
            }
        });
    let finish = create_step("finish")
        .execute(|decided: serde_json::Value, _ctx| async move { Ok(decided) });
    Ok(Workflow::builder("approval")
        .description("Asks a person to approve n")
        .then(ask)
        .then(finish)
        .commit()?)
}

/// A scripted model answering with `answer`, without recording (a fuzz run makes thousands of
/// calls).
fn model(answer: fn(&ModelRequest) -> ScriptedResponse) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(answer).without_recording())
}

/// An agent with the three tools, on the model of [`answer`].
fn tool_agent(id: &str) -> kestrel_core::agent::AgentBuilder {
    Agent::builder(id)
        .instructions(
            "Use get_weather for the weather, book_table to book a table and send_email to \
             send an email. Answer briefly.",
        )
        .model(model(answer))
        .tool(weather_tool())
        .tool(email_tool())
        .tool(booking_tool())
}

/// The text of the newest message, if it is the user's (the first step of a turn).
fn prompt(request: &ModelRequest) -> Option<String> {
    let last = request.messages.last()?;
    (last.role == Role::User).then(|| last.text().to_lowercase())
}

/// The tool agents' model: a tool call on the first step when the prompt asks for one, text
/// otherwise.
fn answer(request: &ModelRequest) -> ScriptedResponse {
    let Some(prompt) = prompt(request) else {
        return ScriptedResponse::text("Done.");
    };
    let offered = |name: &str| request.tools.iter().any(|t| t.name == name);
    let asks = |words: &[&str]| words.iter().any(|w| prompt.contains(w));
    if asks(&["email", "approv", "declin"]) && offered(EMAIL_TOOL) {
        ScriptedResponse::tool_call(
            "call-email",
            EMAIL_TOOL,
            json!({"to": "fuzz@example.com", "subject": "Fuzz", "body": "Hello."}),
        )
    } else if asks(&["book", "resum", "suspend"]) && offered(BOOKING_TOOL) {
        ScriptedResponse::tool_call(
            "call-booking",
            BOOKING_TOOL,
            json!({"restaurant": "Fuzz", "guests": 2}),
        )
    } else if asks(&["weather"]) && offered(WEATHER_TOOL) {
        ScriptedResponse::tool_call("call-weather", WEATHER_TOOL, json!({"city": "Lisbon"}))
    } else {
        ScriptedResponse::text_deltas(["Hello", ", fuzzer."])
    }
}

/// The supervisor's model: delegate the prompt, then answer.
fn supervise(request: &ModelRequest) -> ScriptedResponse {
    match prompt(request) {
        Some(prompt) if !prompt.trim().is_empty() => ScriptedResponse::tool_call(
            "call-research",
            "agent-research",
            json!({"prompt": prompt}),
        ),
        Some(_) => ScriptedResponse::text("Ask me something."),
        None => ScriptedResponse::text("Here is what research found."),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct WeatherInput {
    /// The city.
    city: String,
}

fn weather_tool() -> impl Tool {
    create_tool(WEATHER_TOOL)
        .description("Gets today's weather for a city (made up).")
        .execute(|input: WeatherInput, _ctx| async move {
            Ok::<_, ToolError>(json!({"city": input.city, "sky": "sunny", "temperatureC": 21}))
        })
}

#[derive(Debug, Deserialize, JsonSchema)]
struct EmailInput {
    /// The recipient.
    to: String,
    /// The subject line.
    subject: String,
    /// The message.
    #[serde(default)]
    body: String,
}

fn email_tool() -> impl Tool {
    create_tool(EMAIL_TOOL)
        .description("Sends an email, once a person approves it (sends nothing).")
        .require_approval(true)
        .execute(|email: EmailInput, _ctx| async move {
            Ok::<_, ToolError>(format!(
                "Email {:?} to {} sent ({} bytes).",
                email.subject,
                email.to,
                email.body.len()
            ))
        })
}

#[derive(Debug, Deserialize, JsonSchema)]
struct BookingInput {
    /// The restaurant.
    restaurant: String,
    /// How many people.
    guests: u32,
}

/// What a person answers to `book_table`.
#[derive(Debug, Deserialize, JsonSchema)]
struct BookingChoice {
    /// The time to book, e.g. "19:30".
    time: String,
    /// Book it (or cancel).
    confirm: bool,
}

fn booking_tool() -> impl Tool {
    create_tool(BOOKING_TOOL)
        .description("Books a table, after asking a person for the time.")
        .resume_type::<BookingChoice>()
        .execute(|input: BookingInput, ctx| async move {
            let Some(choice) = ctx.resume_data_as::<BookingChoice>()? else {
                return Err(ctx.suspend(json!({
                    "question": format!("Which time at {} for {}?", input.restaurant, input.guests),
                })));
            };
            Ok(if choice.confirm {
                format!("Booked {} at {}.", input.restaurant, choice.time)
            } else {
                format!("Did not book {}.", input.restaurant)
            })
        })
}
