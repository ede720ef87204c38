//! `kestrel dev`: the HTTP server and the Studio, with demo agents, on SQLite.
//!
//! [`demo_kestrel`] builds the demo instance on one model and one store:
//!
//! - **`assistant`**, a tool-using agent: `get_weather` (a plain tool, made-up data),
//!   `send_email` (needs a person's approval; sends nothing) and `book_table` (suspends to ask
//!   which time to book, with a resume schema the Studio turns into a form), and a skill,
//!   **`weather-briefing`** (what to wear, with a clothing reference it reads on demand);
//! - **`supervisor`**, which delegates to two sub-agents, **`research`** (facts as bullet
//!   points) and **`writing`** (a paragraph from notes); both are also registered on their
//!   own, so they can be talked to directly;
//! - three workflows: **`weather-report`** (parallel arms and a branch), **`publish-post`** (a step that suspends for a person's review) and
//!   **`research-brief`** (an agent step).
//!
//! The four agents above let versions change their instructions and their tools' descriptions
//! (`Editable::instructions().and_tool_descriptions()`): the Studio's Agent tab saves drafts,
//! publishes them and the chat's Draft switch tries them (docs/versions.md).
//!
//! One store holds everything: it is the instance's storage (every stopped run, workflow run,
//! queued message and stored agent is saved there, so a run waiting for an approval survives a
//! restart) and the database of the demo [`Memory`] ([`demo_memory`]), in which the assistant
//! and the supervisor remember their threads and which the server's `/api/memory` routes read:
//! the memory has no store of its own, it takes the instance's.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kestrel::model::ModelSpec;
//! use kestrel::storage::Storage;
//! use kestrel_cli::dev;
//!
//! let storage: Arc<dyn Storage> = Arc::new(dev::open_storage(".kestrel/dev.db".as_ref()).await?);
//! let kestrel = dev::demo_kestrel(ModelSpec::Id("local/smollm2".into()), Arc::clone(&storage))?;
//! dev::server(kestrel, dev::demo_memory()?)?
//!     .serve("127.0.0.1:4111".parse()?)
//!     .await?;
//! # Ok(()) }
//! ```

mod config;
mod docs;
mod ledger;
mod mcp;
mod network;
mod workflows;

pub use config::{ConfigError, DEFAULT_CONFIG, DevConfig};
pub use docs::{DOCS, DOCS_AGENT, DOCS_INDEX, DocsSearch, SEARCH_DOCS, docs_agent, index_docs};
pub use ledger::{LEDGER_ENV, Ledger};
pub use mcp::{MCP_SERVER_ID, demo_mcp_server};
pub use network::COORDINATOR;

pub use workflows::{PUBLISH_POST, RESEARCH_BRIEF, WEATHER_REPORT};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kestrel::agent::{Agent, AgentBuildError};
use kestrel::cluster::Cluster;
use kestrel::kestrel::{Kestrel, KestrelError};
use kestrel::memory::{Memory, MemoryBuildError, WorkingMemory};
use kestrel::model::ModelSpec;
use kestrel::pubsub::SharedPubSub;
use kestrel::server::Server;
use kestrel::skill::{Skill, SkillError, create_skill};
use kestrel::storage::{PgOptions, PostgresStorage, SqliteStorage, Storage, StorageError};
use kestrel::tool::{SharedTool, Tool, create_tool};
use kestrel::version::Editable;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The port `kestrel dev` listens on by default (Mastra's).
pub const DEFAULT_PORT: u16 = 4111;

/// The address `kestrel dev` binds by default: this machine only.
pub const DEFAULT_HOST: &str = "127.0.0.1";

/// The SQLite file `kestrel dev` keeps its threads and runs in, relative to the current
/// directory.
pub const DEFAULT_DB: &str = ".kestrel/dev.db";

/// The id of the tool-using demo agent.
pub const ASSISTANT: &str = "assistant";
/// The id of the demo supervisor.
pub const SUPERVISOR: &str = "supervisor";
/// The id of the supervisor's research sub-agent.
pub const RESEARCH: &str = "research";
/// The id of the supervisor's writing sub-agent.
pub const WRITING: &str = "writing";

/// The name of the assistant's plain tool.
pub const WEATHER_TOOL: &str = "get_weather";
/// The name of the assistant's tool that needs approval.
pub const EMAIL_TOOL: &str = "send_email";
/// The name of the assistant's tool that suspends for resume data.
pub const BOOKING_TOOL: &str = "book_table";

/// Why the demo could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevError {
    /// The database's directory could not be created.
    #[error("cannot create the directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened.
    #[error("cannot open the database {}: {source}", path.display())]
    Storage {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: StorageError,
    },
    /// The PostgreSQL database could not be reached or migrated.
    #[error("cannot open the database {url}: {source}")]
    Postgres {
        /// The URL, its password hidden.
        url: String,
        /// Why.
        #[source]
        source: StorageError,
    },
    /// Redis could not be reached.
    #[error("cannot connect to Redis: {0}")]
    Redis(#[from] kestrel::redis::RedisError),
    /// The memory could not be built.
    #[error("cannot build the demo memory: {0}")]
    Memory(#[from] MemoryBuildError),
    /// An agent could not be built.
    #[error("cannot build a demo agent: {0}")]
    Agent(#[from] AgentBuildError),
    /// The instance could not be built.
    #[error("cannot build the demo instance: {0}")]
    Instance(#[from] KestrelError),
    /// A workflow could not be committed.
    #[error("cannot build a demo workflow: {0}")]
    Workflow(#[from] kestrel::workflow::WorkflowBuildError),
    /// A demo skill is invalid.
    #[error("cannot build a demo skill: {0}")]
    Skill(#[from] SkillError),
    /// The demo MCP server could not be built.
    #[error("cannot build the demo MCP server: {0}")]
    Mcp(#[from] kestrel::mcp::McpServerBuildError),
    /// The `OTEL_EXPORTER_OTLP_*` variables do not configure a usable exporter.
    #[error("cannot export traces over OTLP: {0}")]
    Otlp(#[from] kestrel::otlp::OtlpError),
}

/// Opens (creating it and its directory when needed) the SQLite database at `path`.
pub async fn open_storage(path: &Path) -> Result<SqliteStorage, DevError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| DevError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    SqliteStorage::open(path)
        .await
        .map_err(|source| DevError::Storage {
            path: path.to_path_buf(),
            source,
        })
}

/// Where `kestrel dev` keeps threads, memory and runs: a SQLite file, or a PostgreSQL
/// database (a `postgres://` or `postgresql://` URL) several instances can share.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file (created when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl Database {
    /// A URL with a `postgres` scheme is PostgreSQL; anything else a SQLite path.
    pub fn parse(target: &str) -> Self {
        let lower = target.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Self::Postgres(target.to_owned())
        } else {
            Self::Sqlite(PathBuf::from(target))
        }
    }
}

impl std::fmt::Display for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&redact_url(url)),
        }
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Database({self})")
    }
}

/// `url` with the password of its user info replaced by `***`.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => url.to_owned(),
    }
}

/// An open store of `kestrel dev`, closed cleanly at the end.
#[derive(Clone, Debug)]
pub enum OpenDatabase {
    /// SQLite.
    Sqlite(SqliteStorage),
    /// PostgreSQL.
    Postgres(PostgresStorage),
}

impl OpenDatabase {
    /// The store.
    pub fn storage(&self) -> Arc<dyn Storage> {
        match self {
            Self::Sqlite(s) => Arc::new(s.clone()),
            Self::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// Closes it (waits for writes in flight).
    pub async fn close(self) {
        match self {
            Self::Sqlite(s) => s.close().await,
            Self::Postgres(s) => s.close().await,
        }
    }
}

/// Opens `database`: a SQLite file as [`open_storage`] does, or the PostgreSQL database at
/// its URL with Kestrel's tables in `schema` (created and migrated when missing).
pub async fn open_database(database: &Database, schema: &str) -> Result<OpenDatabase, DevError> {
    match database {
        Database::Sqlite(path) => Ok(OpenDatabase::Sqlite(open_storage(path).await?)),
        Database::Postgres(url) => {
            PostgresStorage::connect(url, PgOptions::schema(schema.to_owned()))
                .await
                .map(OpenDatabase::Postgres)
                .map_err(|source| DevError::Postgres {
                    url: redact_url(url),
                    source,
                })
        }
    }
}

/// The demo instance on `model` (every agent uses it) and `storage` (its runs, and the
/// database of its agents' memory, [`demo_memory`]).
pub fn demo_kestrel(model: ModelSpec, storage: Arc<dyn Storage>) -> Result<Kestrel, DevError> {
    demo_kestrel_with(model, storage, DemoOptions::default())
}

/// What [`demo_kestrel_with`] changes in the demo instance.
#[derive(Debug, Default)]
pub struct DemoOptions {
    /// Run as one instance of a cluster: thread events on this pub/sub, runs shared through
    /// this cluster (see `kestrel::cluster`).
    pub cluster: Option<(SharedPubSub, Cluster)>,
    /// How long `get_weather` and `send_email` take before they answer, as a real API would,
    /// and each plain step of the demo workflows takes (zero, the default: at once). Long
    /// enough, it lets one see what happens when an instance dies in the middle of a tool
    /// call or between two steps.
    pub tool_delay: Duration,
    /// Where `get_weather`, `send_email` and the demo workflows' plain steps record each time
    /// they do their work, for tests that count effects ([`Ledger`]); none by default.
    pub ledger: Option<Ledger>,
    /// More tools for the `assistant`: the tools of the MCP servers `kestrel.toml` names.
    pub assistant_tools: Vec<SharedTool>,
    /// Where the `docs` agent searches Kestrel's documentation ([`index_docs`] fills it); no
    /// `docs` agent without it.
    pub docs: Option<DocsSearch>,
}

/// [`demo_kestrel`] with [`DemoOptions`]: as one instance of a cluster, or with slow tools.
pub fn demo_kestrel_with(
    model: ModelSpec,
    storage: Arc<dyn Storage>,
    options: DemoOptions,
) -> Result<Kestrel, DevError> {
    let DemoOptions {
        cluster,
        tool_delay,
        ledger,
        assistant_tools,
        docs,
    } = options;
    let work = ledger::Work {
        delay: tool_delay,
        ledger,
    };
    let memory = demo_memory()?;

    let assistant = Agent::builder(ASSISTANT)
        .name("Assistant")
        .description("Checks the weather, books tables and sends emails (with your approval).")
        .instructions(
            "You are a helpful assistant. Use get_weather for weather questions, book_table to \
             book a restaurant and send_email to send an email. Answer briefly.",
        )
        .model(model.clone())
        .tool(weather_tool(work.clone()))
        .tool(email_tool(work.clone()))
        .tool(booking_tool())
        .tools(assistant_tools)
        .skills([weather_briefing_skill()?])
        .memory(memory.clone())
        .editable(demo_editable())
        // A live scorer on every answer (deterministic, no model): the Studio shows its score
        // in the run's footer and on its trace.
        .scorer(
            kestrel::evals::code::Tone::new(),
            kestrel::eval::ScoreSampling::None,
        )
        .build()?;

    let research = research_agent(model.clone())?;
    let writing = writing_agent(model.clone())?;
    let supervisor = Agent::builder(SUPERVISOR)
        .name("Supervisor")
        .description("Researches a topic with one sub-agent and writes it up with another.")
        .instructions(
            "You coordinate two helpers. First delegate research on the user's topic to \
             agent-research, then give its notes to agent-writing for a paragraph, then answer \
             the user with that paragraph.",
        )
        .model(model.clone())
        .agents([research.clone(), writing.clone()])
        .memory(memory.clone())
        .editable(demo_editable())
        .build()?;

    let demo_workflows = workflows::demo_workflows(research.clone(), &work)?;
    let weather_report = demo_workflows
        .iter()
        .find(|w| w.id() == workflows::WEATHER_REPORT)
        .cloned();
    let coordinator = network::coordinator(
        model.clone(),
        memory.clone(),
        [research.clone(), writing.clone()],
        weather_report,
        weather_tool(work),
    )?;
    // The storage, given once: the instance saves its runs, workflow runs, queued messages and
    // stored agents in the memory's database.
    let mut builder = Kestrel::builder()
        .storage(storage)
        .memory(memory)
        // Every run a trace, kept in memory (the last 10,000), at /api/observability/traces.
        .tracing(kestrel::trace::TracingConfig::new())
        .agent(assistant)
        .agent(supervisor)
        .agent(coordinator)
        // The supervisor's sub-agents, once: in the instance they are the same agents.
        .agent(research.clone())
        .agent(writing);
    for workflow in demo_workflows {
        builder = builder.workflow(workflow);
    }
    if let Some(docs) = &docs {
        builder = builder.agent(docs_agent(model.clone(), docs)?);
    }
    // Traces go to an OTLP backend too when the standard variables name one.
    if let Some(exporter) = kestrel::otlp::OtlpExporter::from_env()? {
        tracing::info!("traces are exported over OTLP (OTEL_EXPORTER_OTLP_*)");
        builder = builder.span_sink(Arc::new(exporter));
    }
    if let Some((pubsub, cluster)) = cluster {
        builder = builder.pubsub(pubsub).cluster(cluster);
    }
    Ok(builder.build()?)
}

/// The memory of the demo agents, on their instance's storage: the last 20 messages of a
/// thread and a working memory about the user. [`server`] serves it behind the memory routes.
pub fn demo_memory() -> Result<Memory, DevError> {
    Ok(Memory::builder()
        .last_messages(20)
        .working_memory(WorkingMemory::template(
            "# About the user\n- Name:\n- Preferences:\n",
        ))
        .build()?)
}

/// The server of `kestrel dev`: `kestrel`'s agents, the Studio, `memory` (the demo agents',
/// [`demo_memory`], on the instance's storage) behind the memory routes, and the token from
/// `KESTREL_API_TOKEN` when it is set.
pub fn server(kestrel: Kestrel, memory: Memory) -> Result<Server, DevError> {
    let mcp = demo_mcp_server(&kestrel)?;
    Ok(Server::from_env(kestrel)
        .studio(true)
        .memory(memory)
        .mcp_server(mcp))
}

fn research_agent(model: ModelSpec) -> Result<Agent, AgentBuildError> {
    Agent::builder(RESEARCH)
        .name("Research")
        .description("Gathers facts on a topic and returns them as three short bullet points.")
        .instructions("You research topics. Answer with three short bullet points of facts.")
        .model(model)
        .editable(demo_editable())
        .build()
}

fn writing_agent(model: ModelSpec) -> Result<Agent, AgentBuildError> {
    Agent::builder(WRITING)
        .name("Writing")
        .description("Turns notes into one short, polished paragraph.")
        .instructions("You write one short paragraph from the notes you are given.")
        .model(model)
        .editable(demo_editable())
        .build()
}

/// What versions of the demo agents may change: their instructions and their tools'
/// descriptions (the Studio's editor saves, tries and publishes them; docs/versions.md).
fn demo_editable() -> Editable {
    Editable::instructions().and_tool_descriptions()
}

/// Input of `get_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
struct WeatherInput {
    /// The city, e.g. "Lisbon".
    city: String,
}

/// `get_weather`: made-up but stable weather, so the demo needs no network; after `delay`.
/// The name of the assistant's demo skill.
pub const WEATHER_BRIEFING: &str = "weather-briefing";

/// The assistant's skill: how to brief someone on the weather, with a clothing reference.
fn weather_briefing_skill() -> Result<Skill, SkillError> {
    create_skill(
        WEATHER_BRIEFING,
        "Briefs someone on the day's weather: what it will be like and what to wear.",
        include_str!("dev/skills/weather-briefing.md"),
    )
    .reference("clothing.md", include_str!("dev/skills/clothing.md"))
    .license("MIT")
    .build()
}

fn weather_tool(work: ledger::Work) -> impl Tool {
    create_tool(WEATHER_TOOL)
        .description("Gets today's weather for a city (demo data).")
        .execute(move |input: WeatherInput, ctx| {
            let work = work.clone();
            async move {
                work.done("tool", ctx.run_id(), ctx.tool_call_id()).await;
                Ok(demo_weather(&input.city))
            }
        })
}

/// The demo's weather for `city`: the same for the same name.
fn demo_weather(city: &str) -> Value {
    const SKIES: [&str; 4] = ["sunny", "partly cloudy", "overcast", "light rain"];
    let seed = city
        .trim()
        .to_lowercase()
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    json!({
        "city": city.trim(),
        "sky": SKIES[(seed % 4) as usize],
        "temperatureC": 8 + (seed / 4 % 20),
    })
}

/// Input of `send_email`.
#[derive(Debug, Deserialize, JsonSchema)]
struct EmailInput {
    /// The recipient's address.
    to: String,
    /// The subject line.
    subject: String,
    /// The message.
    #[serde(default)]
    body: String,
}

/// `send_email`: waits for a person's approval, then pretends to send (taking the demo's
/// delay).
fn email_tool(work: ledger::Work) -> impl Tool {
    create_tool(EMAIL_TOOL)
        .description("Sends an email. A person approves every email before it goes out.")
        .require_approval(true)
        .execute(move |email: EmailInput, ctx| {
            let work = work.clone();
            async move {
                work.done("tool", ctx.run_id(), ctx.tool_call_id()).await;
                let words = email.body.split_whitespace().count();
                Ok(format!(
                    "Email \"{}\" to {} sent ({words} words; demo: nothing left this machine).",
                    email.subject, email.to
                ))
            }
        })
}

/// Input of `book_table`.
#[derive(Debug, Deserialize, JsonSchema)]
struct BookingInput {
    /// The restaurant's name.
    restaurant: String,
    /// How many people.
    guests: u32,
}

/// The times `book_table` offers.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
enum Slot {
    #[serde(rename = "18:00")]
    Early,
    #[serde(rename = "19:30")]
    Middle,
    #[serde(rename = "21:00")]
    Late,
}

impl Slot {
    fn as_str(self) -> &'static str {
        match self {
            Slot::Early => "18:00",
            Slot::Middle => "19:30",
            Slot::Late => "21:00",
        }
    }
}

/// What a person answers to `book_table`'s question.
#[derive(Debug, Deserialize, JsonSchema)]
struct BookingChoice {
    /// The time to book.
    time: Slot,
    /// Book it (or cancel).
    confirm: bool,
    /// A note for the restaurant.
    #[serde(default)]
    note: Option<String>,
}

/// `book_table`: suspends to ask a person which time to book.
fn booking_tool() -> impl Tool {
    create_tool(BOOKING_TOOL)
        .description("Books a restaurant table. Asks the user to pick a time.")
        .resume_type::<BookingChoice>()
        .execute(|input: BookingInput, ctx| async move {
            let Some(choice) = ctx.resume_data_as::<BookingChoice>()? else {
                return Err(ctx.suspend(json!({
                    "question": format!(
                        "Which time should I book at {} for {}?",
                        input.restaurant, input.guests
                    ),
                    "times": ["18:00", "19:30", "21:00"],
                })));
            };
            if !choice.confirm {
                return Ok(format!(
                    "The user decided not to book {}.",
                    input.restaurant
                ));
            }
            let note = choice
                .note
                .filter(|n| !n.trim().is_empty())
                .map(|n| format!(" Note: {}", n.trim()))
                .unwrap_or_default();
            Ok(format!(
                "Booked {} for {} at {} (demo: no restaurant was called).{note}",
                input.restaurant,
                input.guests,
                choice.time.as_str()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weather_is_stable_per_city() {
        let (a, b) = (demo_weather("Lisbon"), demo_weather(" lisbon "));
        assert_eq!(a["sky"], b["sky"]);
        assert_eq!(a["temperatureC"], b["temperatureC"]);
        let t = demo_weather("Oslo")["temperatureC"].as_u64().unwrap_or(0);
        assert!((8..28).contains(&t));
    }
}
