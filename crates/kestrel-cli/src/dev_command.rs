//! `kestrel dev`: the server and the Studio with the demo agents of [`kestrel_cli::dev`].
//!
//! The checks that can fail come first, each ending the program with one line and exit code 2:
//! a public address without `KESTREL_API_TOKEN`, no model, an unknown model or a missing API
//! key, a database that cannot be opened, an address in use. The embedded model is pulled into
//! the cache first if it is not there (as `kestrel chat` does). Then the URLs are printed and
//! the server runs until Ctrl-C (or SIGTERM), which closes the database cleanly.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use kestrel::model::ModelSpec;
use kestrel::server::{API_TOKEN_ENV, ServeError};
use kestrel_cli::dev;

use crate::cli::DevArgs;
use crate::exit::{FAILURE, USAGE, fail};
use crate::model_choice::{process_env, resolved_model_for_command};

/// Runs `kestrel dev` and returns the exit code.
pub async fn run(args: DevArgs) -> ExitCode {
    let addr = SocketAddr::new(args.host, args.port);
    if !addr.ip().is_loopback() && process_env(API_TOKEN_ENV).is_none_or(|t| t.trim().is_empty()) {
        return fail(USAGE, public_without_token(addr));
    }
    let (spec, model) = match resolved_model_for_command(args.model.as_deref()).await {
        Ok(resolved) => resolved,
        Err(code) => return code,
    };
    if args.redis.is_some() && matches!(args.db, dev::Database::Sqlite(_)) {
        return fail(
            USAGE,
            "--redis shares runs between instances, which needs a database they share: give \
             --db a postgres:// URL",
        );
    }
    let storage = match dev::open_database(&args.db, &args.schema).await {
        Ok(storage) => storage,
        Err(error) => return fail(USAGE, error),
    };
    let cluster = match &args.redis {
        Some(url) => match kestrel::redis::RedisCluster::connect_with(
            url,
            kestrel::redis::RedisPubSubOptions::default().key_prefix(&args.redis_prefix),
        )
        .await
        {
            Ok(redis) => {
                let mut cluster = redis
                    .cluster()
                    .lease_ttl(Duration::from_millis(args.lease_ttl_ms));
                if let Some(id) = &args.instance_id {
                    cluster = cluster.instance_id(id.clone());
                }
                Some((redis.pubsub(), cluster))
            }
            Err(error) => return fail(USAGE, dev::DevError::Redis(error)),
        },
        None => None,
    };
    let instance = cluster.as_ref().map(|(_, c)| c.id().to_owned());
    // For tests: where the demo's tools and steps record their work (see `dev::Ledger`).
    let ledger = match std::env::var_os(dev::LEDGER_ENV) {
        Some(path) => {
            let name = format!(
                "{}/{}",
                instance.as_deref().unwrap_or("dev"),
                std::process::id()
            );
            match dev::Ledger::open(path.as_ref(), &name) {
                Ok(ledger) => Some(ledger),
                Err(error) => {
                    return fail(
                        USAGE,
                        format!(
                            "cannot open {} ({}): {error}",
                            dev::LEDGER_ENV,
                            path.display()
                        ),
                    );
                }
            }
        }
        None => None,
    };
    // kestrel.toml's MCP servers: their tools go to the assistant. A server that does not
    // answer is reported now and shown, with its error, on the Studio's MCP page.
    let mcp_client = match dev::DevConfig::find(args.config.as_deref())
        .and_then(|config| config.mcp_client(process_env))
    {
        Ok(client) => client,
        Err(error) => return fail(USAGE, error),
    };
    let mut mcp_report = Vec::new();
    let mut assistant_tools = Vec::new();
    if let Some(client) = &mcp_client {
        let listed = client.list_tools_with_errors().await;
        let mut counts = std::collections::BTreeMap::<&str, usize>::new();
        for tool in &listed.tools {
            *counts.entry(tool.server()).or_default() += 1;
        }
        for name in client.server_names() {
            let count = counts.get(name.as_str()).copied().unwrap_or(0);
            match listed.errors.get(&name) {
                Some(errors) => {
                    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    mcp_report.push(format!("{name} ({count} tools; {})", errors.join("; ")));
                }
                None => mcp_report.push(format!("{name} ({count} tools)")),
            }
        }
        assistant_tools = listed
            .tools
            .into_iter()
            .map(|tool| std::sync::Arc::new(tool) as kestrel::tool::SharedTool)
            .collect();
    }
    // The docs agent: Kestrel's documentation, indexed in the dev database by the local
    // embedder. On with the embedded model (the offline defaults), else with --docs.
    let docs = if args.docs.unwrap_or_else(|| spec.starts_with("local/")) {
        docs_search(&args).await
    } else {
        None
    };
    let options = dev::DemoOptions {
        cluster,
        tool_delay: Duration::from_millis(args.tool_delay_ms),
        ledger,
        assistant_tools,
        docs: docs.clone(),
    };
    let kestrel = match dev::demo_kestrel_with(ModelSpec::Model(model), storage.storage(), options)
    {
        Ok(kestrel) => kestrel,
        Err(error) => return fail(USAGE, error),
    };
    // What the memory routes serve: the demo agents' memory, on the same database.
    let memory = match dev::demo_memory() {
        Ok(memory) => memory,
        Err(error) => return fail(USAGE, error),
    };
    // Workflow runs a process that died left running (or sleeping) go on from their last
    // step boundary.
    let restarted = kestrel.recover_workflow_runs().await;
    // Messages queued on threads that no run took yet run now, in order.
    let queues = kestrel.drain_message_queues().await;
    // Live scorings a process that stopped sampled but did not store are scored now.
    let scorings = kestrel.resume_pending_scores().await;
    let server = match dev::server(kestrel, memory) {
        Ok(server) => {
            let mut server = server.allowed_hosts(args.allowed_hosts.clone());
            if let Some(search) = &docs {
                // The docs index and whatever `kestrel rag ingest` adds to this database, at
                // /api/vector/dev/...
                let kind = match args.db {
                    dev::Database::Sqlite(_) => "sqlite",
                    dev::Database::Postgres(_) => "pgvector",
                };
                server = server
                    .vector(
                        "dev",
                        kestrel::server::ServedVectorStore::new(search.store.clone(), kind)
                            .description("The dev database: Kestrel's docs (kestrel_docs) and what `kestrel rag ingest` adds"),
                    )
                    .embedder(
                        kestrel::server::ServedEmbedder::new(search.embedder.clone(), 256)
                            .description("all-MiniLM-L6-v2, run in-process"),
                    );
            }
            match mcp_client.clone() {
                Some(client) => server.mcp_client(client),
                None => server,
            }
        }
        Err(error) => return fail(USAGE, error),
    };
    let (listener, bound) = match server.bind(addr).await {
        Ok(bound) => bound,
        Err(ServeError::TokenRequired { addr }) => return fail(USAGE, public_without_token(addr)),
        Err(ServeError::Io { addr, source }) => {
            return fail(
                USAGE,
                format!(
                    "cannot listen on {addr}: {source} (is another `kestrel dev` running? \
                     choose another port with --port)"
                ),
            );
        }
        Err(error) => return fail(USAGE, error),
    };
    print_banner(bound, &spec, &args.db, instance.as_deref());
    if !mcp_report.is_empty() {
        println!(
            "  MCP servers the assistant uses: {}",
            mcp_report.join(", ")
        );
    }
    if queues > 0 {
        println!("  running the messages queued on {queues} thread(s) by a previous process");
    }
    if scorings > 0 {
        println!("  scoring the live scorings a previous process left pending");
    }
    if let Some(search) = docs {
        // In the background: the server answers at once; the docs agent's searches find the
        // pages as they are indexed.
        tokio::spawn(index_docs(search));
    }
    for (workflow, run) in &restarted {
        println!(
            "  restarted workflow run {run} of {workflow}, left behind by a process that died"
        );
    }
    let outcome = tokio::select! {
        served = server.serve_on(listener, bound) => served,
        () = shutdown() => Ok(()),
    };
    storage.close().await;
    if let Some(client) = mcp_client {
        // Stops the servers' child processes.
        client.disconnect().await;
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(FAILURE, error),
    }
}

/// The store and embedder of the docs agent, or `None` (said on stderr) when the database
/// cannot keep vectors (a PostgreSQL without pgvector).
async fn docs_search(args: &DevArgs) -> Option<dev::DocsSearch> {
    let store = match kestrel_cli::rag::open_vector_store(&args.db, &args.schema).await {
        Ok(store) => store,
        Err(error) => {
            eprintln!("warning: no docs agent: {error}");
            return None;
        }
    };
    match kestrel_cli::rag::resolve_embedder(kestrel_cli::rag::DEFAULT_EMBEDDER) {
        Ok(embedder) => Some(dev::DocsSearch { store, embedder }),
        Err(error) => {
            eprintln!("warning: no docs agent: {error}");
            None
        }
    }
}

/// Indexes Kestrel's documentation for the docs agent (the embedder's model pulled first if
/// needed); only pages changed since the last start are embedded again.
async fn index_docs(search: dev::DocsSearch) {
    if let Err(error) = crate::models::ensure_cached(kestrel::embed_local::MODEL_ID).await {
        eprintln!("warning: the docs agent cannot search: {error}");
        return;
    }
    match dev::index_docs(&search, |_| {}).await {
        Ok(report) if report.ingested() > 0 => println!(
            "  docs agent: indexed {} pages of Kestrel's documentation ({} chunks)",
            report.ingested(),
            report.chunks()
        ),
        Ok(_) => {}
        Err(error) => eprintln!("warning: indexing the docs failed: {error}"),
    }
}

/// Resolves on Ctrl-C (SIGINT) or, on Unix, SIGTERM: the server stops and the database is
/// closed cleanly.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    // Without a handler, the server runs until the process is killed.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn public_without_token(addr: SocketAddr) -> String {
    format!(
        "refusing to listen on {addr}: beyond this machine every agent would be open to \
         anyone. Set {API_TOKEN_ENV} to a secret (the Studio asks for it), or leave --host at \
         its default, 127.0.0.1"
    )
}

/// Where to go, on stdout (the first line is the Studio's URL).
fn print_banner(addr: SocketAddr, model: &str, db: &dev::Database, instance: Option<&str>) {
    let host = if addr.ip().is_unspecified() {
        "localhost".to_owned()
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    let base = format!("http://{host}:{}", addr.port());
    println!("Kestrel Studio: {base}/");
    println!("  API:      {base}/api (e.g. {base}/api/agents)");
    println!(
        "  MCP:      {base}/api/mcp/{}/mcp (Streamable HTTP; `kestrel mcp serve` for stdio)",
        dev::MCP_SERVER_ID
    );
    println!("  model:    {model}");
    println!("  database: {db}");
    if let Some(instance) = instance {
        println!("  instance: {instance} (sharing runs through Redis)");
    }
    println!(
        "  agents:   {} ({}; {} needs your approval; {} asks you for a time; skill {})",
        dev::ASSISTANT,
        dev::WEATHER_TOOL,
        dev::EMAIL_TOOL,
        dev::BOOKING_TOOL,
        dev::WEATHER_BRIEFING
    );
    println!(
        "            {} (delegates to {} and {})",
        dev::SUPERVISOR,
        dev::RESEARCH,
        dev::WRITING
    );
    if process_env(API_TOKEN_ENV).is_some_and(|t| !t.trim().is_empty()) {
        println!("  token:    every API call needs {API_TOKEN_ENV} (the Studio asks for it once)");
    }
    println!("Press Ctrl-C to stop.");
}
