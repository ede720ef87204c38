//! The body of `generate` and `stream`: the messages, the thread, the options a caller may
//! set, and the rules its token allows.

use kestrel_core::agent::RunOptions;
use kestrel_core::context::RequestContext;
use kestrel_core::message::Message;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::*;
use crate::ApiError;

/// `memory` of a run body: the thread (an id, or `{id}`) and its resource.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryBody {
    pub thread: ThreadRef,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource: String,
}

/// A thread named by its id or as `{id}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ThreadRef {
    Id(
        #[serde(deserialize_with = "crate::wire::id")]
        #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
        String,
    ),
    Object {
        #[serde(deserialize_with = "crate::wire::id")]
        #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
        id: String,
    },
}

impl ThreadRef {
    fn id(&self) -> &str {
        match self {
            ThreadRef::Id(id) | ThreadRef::Object { id } => id,
        }
    }
}

/// The body of `generate` and `stream`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("dependentSchemas" = {"threadId": {
    "required": ["resourceId"],
    "properties": {"resourceId": {"type": "string"}},
}}))]
pub(crate) struct RunBody {
    /// The input: a string, a message `{role, content}`, or an array of them.
    #[schemars(schema_with = "messages_schema")]
    pub messages: Value,
    /// The thread and resource the run remembers in.
    #[serde(default)]
    pub memory: Option<MemoryBody>,
    /// Mastra's older top-level form of `memory`.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub thread_id: Option<String>,
    /// Mastra's older top-level form of `memory`; alone, the resource of a run without a
    /// thread.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource_id: Option<String>,
    /// Values the tools and hooks of the run read.
    #[serde(default)]
    pub request_context: Option<Map<String, Value>>,
    /// The run's id (a fresh one when absent).
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: Option<String>,
    /// The most model steps the run may take (at most the agent's own limit).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(range(min = 1))]
    pub max_steps: Option<u32>,
    /// Keep the stream open until background tasks have finished.
    #[serde(default)]
    pub until_idle: Option<bool>,
    /// Which stored version each agent of the run uses (Mastra's `versions`), carried
    /// through every delegation: `{"agents": {"<id>": {"status": "draft"} | {"versionId": "…"}}}`.
    #[serde(default)]
    pub versions: Option<kestrel_core::version::Versions>,
    /// Where the run's trace goes and what it says of the run (Mastra's `tracingOptions`).
    #[serde(default)]
    pub tracing_options: Option<TracingOptionsBody>,
}

/// Mastra's `tracingOptions`: the caller's trace and span, and the run span's name, tags,
/// metadata and user.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// With a parent span, a trace id that is a string (present as `null` is no trace id).
#[schemars(extend("dependentSchemas" = {"parentSpanId": {
    "required": ["traceId"],
    "properties": {"traceId": {"type": "string"}}
}}))]
pub(crate) struct TracingOptionsBody {
    /// The trace to put the run in (32 lowercase hex digits, not all zero).
    #[serde(default)]
    #[schemars(pattern("^(?!0{32}$)[0-9a-f]{32}$"))]
    pub trace_id: Option<String>,
    /// The span the run hangs under (16 lowercase hex digits, not all zero), with `traceId`.
    #[serde(default)]
    #[schemars(pattern("^(?!0{16}$)[0-9a-f]{16}$"))]
    pub parent_span_id: Option<String>,
    /// The run span's name.
    #[serde(default)]
    #[schemars(length(min = 1, max = 200), pattern(r"\S"))]
    pub root_span_name: Option<String>,
    /// Tags of the run's span.
    #[serde(default)]
    #[schemars(length(max = 32), inner(length(min = 1, max = 128)))]
    pub tags: Vec<String>,
    /// Metadata of the run's span.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 64))]
    pub metadata: Map<String, Value>,
    /// The user the run acts for.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub user_id: Option<String>,
}

/// At most this many tags, metadata entries; each tag at most this long.
const MAX_TRACE_TAGS: usize = 32;
const MAX_TRACE_METADATA: usize = 64;
const MAX_TAG_LEN: usize = 128;

impl TracingOptionsBody {
    /// The run's trace (when the body names one) and options, or why they are refused.
    fn check(
        self,
    ) -> Result<
        (
            Option<kestrel_core::trace::TraceContext>,
            kestrel_core::trace::TracingOptions,
        ),
        ApiError,
    > {
        use kestrel_core::trace::TraceContext;
        let context = match (self.trace_id, self.parent_span_id) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(ApiError::invalid(
                    "tracingOptions.parentSpanId needs a traceId",
                ));
            }
            (Some(trace_id), parent) => {
                if !TraceContext::is_trace_id(&trace_id) {
                    return Err(ApiError::invalid(
                        "tracingOptions.traceId must be 32 lowercase hex digits, not all zero",
                    ));
                }
                if parent
                    .as_deref()
                    .is_some_and(|p| !TraceContext::is_span_id(p))
                {
                    return Err(ApiError::invalid(
                        "tracingOptions.parentSpanId must be 16 lowercase hex digits, not all zero",
                    ));
                }
                Some(TraceContext {
                    trace_id,
                    parent_span_id: parent,
                })
            }
        };
        if self.tags.len() > MAX_TRACE_TAGS
            || self
                .tags
                .iter()
                .any(|t| t.is_empty() || t.chars().count() > MAX_TAG_LEN)
        {
            return Err(ApiError::invalid(format!(
                "tracingOptions.tags: at most {MAX_TRACE_TAGS} tags of 1 to {MAX_TAG_LEN} characters"
            )));
        }
        if self.metadata.len() > MAX_TRACE_METADATA {
            return Err(ApiError::invalid(format!(
                "tracingOptions.metadata: at most {MAX_TRACE_METADATA} entries"
            )));
        }
        if self
            .root_span_name
            .as_deref()
            .is_some_and(|n| n.trim().is_empty() || n.chars().count() > 200)
        {
            return Err(ApiError::invalid(
                "tracingOptions.rootSpanName must be 1 to 200 characters, not only spaces",
            ));
        }
        if let Some(problem) = self.user_id.as_deref().and_then(id_problem) {
            return Err(ApiError::invalid(format!(
                "tracingOptions.userId: {problem}"
            )));
        }
        let options = kestrel_core::trace::TracingOptions {
            root_span_name: self.root_span_name,
            tags: self.tags,
            metadata: self.metadata,
            user_id: self.user_id,
        };
        Ok((context, options))
    }
}

/// At most this many agents in a body's `versions`.
const MAX_VERSION_CHOICES: usize = 64;

/// Refuses a `versions` naming too many agents, or version ids that cannot be ids.
fn check_versions(versions: &kestrel_core::version::Versions) -> Result<(), ApiError> {
    use kestrel_core::version::VersionChoice;
    if versions.agents.len() > MAX_VERSION_CHOICES {
        return Err(ApiError::invalid(format!(
            "versions.agents may name at most {MAX_VERSION_CHOICES} agents"
        )));
    }
    // Agent ids are only compared with the agents' own; a version id is looked up.
    for choice in versions.agents.values() {
        if let VersionChoice::Id { version_id } = choice
            && let Some(problem) = id_problem(version_id)
        {
            return Err(ApiError::invalid(format!(
                "versions.agents: versionId: {problem}"
            )));
        }
    }
    Ok(())
}

/// What a request body may ask of a run, whatever token the caller holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyRules {
    /// The agent's own step limit: `maxSteps` may lower it, not raise it.
    pub max_steps: u32,
    /// Whether messages with role `system` are taken (off unless the server opts in).
    pub system_messages: bool,
}

impl BodyRules {
    /// The rules for runs of `agent` on this server.
    pub(crate) fn of(agent: &kestrel_core::agent::Agent, state: &crate::AppState) -> Self {
        Self {
            max_steps: agent.max_steps(),
            system_messages: state.system_messages,
        }
    }
}

/// A body's `requestContext` without the keys the framework reserves (`kestrel.*`: the
/// run's thread, resource and id, the delegation depth), which only the server sets.
pub(crate) fn client_context(entries: Option<Map<String, Value>>) -> RequestContext {
    let entries: std::collections::BTreeMap<String, Value> = entries
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| {
            let reserved = kestrel_core::context::is_reserved_key(key);
            if reserved {
                tracing::debug!(%key, "dropping a reserved request context key from a body");
            }
            !reserved
        })
        .collect();
    RequestContext::from(entries)
}

impl RunBody {
    /// The input messages and the run's options. A caller pinned to a resource runs as that
    /// resource: a thread of another is refused, and the request context carries it.
    pub(crate) fn into_run(
        self,
        caller: &crate::auth::Caller,
        rules: BodyRules,
    ) -> Result<(Vec<Message>, RunOptions), ApiError> {
        let messages = input_messages(&self.messages, rules.system_messages)?;
        let mut options = RunOptions::new();
        if let Some(trace) = &caller.trace {
            options = options.trace(trace.clone());
        }
        let memory = match (self.memory, self.thread_id, self.resource_id) {
            (Some(memory), _, _) => Some((memory.thread.id().to_owned(), memory.resource)),
            (None, Some(thread), Some(resource)) => Some((thread, resource)),
            (None, Some(_), None) => {
                return Err(ApiError::invalid(
                    "threadId needs a resourceId: every thread belongs to one resource",
                ));
            }
            (None, None, _) => None,
        };
        if let Some((thread, resource)) = &memory {
            if thread.trim().is_empty() || resource.trim().is_empty() {
                return Err(ApiError::invalid(
                    "memory.thread and memory.resource must not be empty",
                ));
            }
            caller.check_resource(resource)?;
            options = options.memory(thread, resource);
        }
        let context = client_context(self.request_context);
        if let Some(own) = &caller.resource {
            // Set by the server from the token: a body cannot claim another identity.
            context.set(kestrel_core::context::RESOURCE_ID_KEY, own.as_str());
            options = options.resource(own);
        }
        options = options.request_context(context);
        if let Some(run_id) = self.run_id {
            options = options.run_id(run_id);
        }
        if let Some(max_steps) = self.max_steps {
            if max_steps == 0 {
                return Err(ApiError::invalid("maxSteps must be at least 1"));
            }
            // The agent's limit is the operator's: a body may ask for fewer steps only.
            options = options.max_steps(max_steps.min(rules.max_steps));
        }
        if let Some(until_idle) = self.until_idle {
            options = options.until_idle(until_idle);
        }
        if let Some(versions) = self.versions {
            check_versions(&versions)?;
            caller.check_versions(&versions)?;
            options = options.versions(versions);
        }
        if let Some(tracing) = self.tracing_options {
            let (context, tracing) = tracing.check()?;
            // The body's trace over the `traceparent` header's: it is the more explicit.
            if let Some(context) = context {
                options = options.trace(context);
            }
            options = options.tracing_options(tracing);
        }
        Ok((messages, options))
    }
}

/// A count (`maxSteps`): a JSON integer, also written with a zero fraction (`3.0`), as JSON
/// Schema's `integer` allows.
pub(crate) fn opt_count<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u32>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX))
            .map(|f| f as u64)
    });
    match whole.and_then(|n| u32::try_from(n).ok()) {
        Some(n) => Ok(Some(n)),
        None => Err(serde::de::Error::custom(format!(
            "expected a whole number from 0 to {}, not {number}",
            u32::MAX
        ))),
    }
}
