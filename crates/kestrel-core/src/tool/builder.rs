//! Building tools from closures: typed (`serde` + `schemars`) or from a JSON schema.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;

use crate::schema::schema_of;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ApprovalContext, ApprovalPolicy, Tool, ToolContext, ToolError};

/// Starts building a tool named `id` (Mastra's `createTool`).
///
/// ```
/// use kestrel_core::tool::{create_tool, ToolError};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct AddInput { a: f64, b: f64 }
///
/// let add = create_tool("add")
///     .description("Adds two numbers")
///     .execute(|input: AddInput, _ctx| async move { Ok(input.a + input.b) });
/// ```
pub fn create_tool(id: impl Into<String>) -> ToolBuilder {
    ToolBuilder::new(id)
}

/// Builder for a closure-backed tool. See [`create_tool`].
#[derive(Debug, Clone)]
pub struct ToolBuilder {
    id: String,
    description: String,
    input_schema: Option<Value>,
    output_schema: Option<Value>,
    approval: ApprovalPolicy,
    suspend_schema: Option<Value>,
    resume_schema: Option<Value>,
}

impl ToolBuilder {
    /// A builder for a tool named `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            description: String::new(),
            input_schema: None,
            output_schema: None,
            approval: ApprovalPolicy::Never,
            suspend_schema: None,
            resume_schema: None,
        }
    }

    /// Requires a person's approval before every call (`true`) or none (`false`, the
    /// default). The run stops with `tool-call-approval`; the run's handle's `approve`
    /// (`agent.run(run_id).approve(call_id)`) runs the tool, `decline` tells the model it was
    /// not approved.
    pub fn require_approval(mut self, required: bool) -> Self {
        self.approval = required.into();
        self
    }

    /// Requires approval for the calls `predicate(args, ctx)` selects (say, payments above an
    /// amount). It is asked once, when the model makes the call.
    pub fn require_approval_when(
        mut self,
        predicate: impl Fn(&Value, &ApprovalContext<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.approval = ApprovalPolicy::when(predicate);
        self
    }

    /// Declares the JSON schema of the payload `execute` passes to [`ToolContext::suspend`]; a
    /// payload that does not match fails the call instead of stopping the run.
    pub fn suspend_schema(mut self, schema: Value) -> Self {
        self.suspend_schema = Some(schema);
        self
    }

    /// [`ToolBuilder::suspend_schema`] from a type.
    pub fn suspend_type<T: JsonSchema>(self) -> Self {
        self.suspend_schema(schema_of::<T>())
    }

    /// Declares the JSON schema of the resume data; data that does not match is refused and
    /// the run stays suspended.
    pub fn resume_schema(mut self, schema: Value) -> Self {
        self.resume_schema = Some(schema);
        self
    }

    /// [`ToolBuilder::resume_schema`] from a type.
    pub fn resume_type<T: JsonSchema>(self) -> Self {
        self.resume_schema(schema_of::<T>())
    }

    /// Finishes a client tool: it has no `execute` here. When the model calls it the run stops
    /// with finish reason `tool-calls`; the caller runs it and submits the result with the
    /// run's handle's `submit` (`agent.run(run_id).submit(..)`). The input schema comes from
    /// `I` unless [`ToolBuilder::input_schema`] was given.
    pub fn client<I: JsonSchema>(self) -> FnTool {
        let input_schema = self.input_schema.clone().unwrap_or_else(schema_of::<I>);
        self.finish(input_schema, None)
    }

    fn finish(self, input_schema: Value, exec: Option<Arc<ExecFn>>) -> FnTool {
        FnTool {
            id: self.id,
            description: self.description,
            input_schema,
            output_schema: self.output_schema,
            approval: self.approval,
            suspend_schema: self.suspend_schema,
            resume_schema: self.resume_schema,
            exec,
        }
    }

    /// What the tool does; the model decides from this when to call it.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Uses this JSON schema for the input instead of deriving one from the input type.
    /// With `execute(|input: serde_json::Value, ctx| ...)` this makes a dynamic tool.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// Declares the output's JSON schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Declares the output's JSON schema from a type.
    pub fn output_type<O: JsonSchema>(self) -> Self {
        self.output_schema(schema_of::<O>())
    }

    /// Finishes the tool with its `execute` function.
    ///
    /// The input type `I` is deserialised from the model's (validated) arguments; unless
    /// [`ToolBuilder::input_schema`] was given, its JSON schema comes from `schemars`. The
    /// output `O` is serialised to JSON for the model. The closure returns
    /// `Result<O, ToolError>`, and `?` works on any error that converts into [`ToolError`]
    /// (a `serde_json` error does; wrap others with [`ToolError::new`]):
    ///
    /// ```
    /// # use kestrel_core::tool::{create_tool, ToolError};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Lookup {
    ///     code: String,
    /// }
    ///
    /// let tool = create_tool("lookup")
    ///     .description("Finds a country by its code")
    ///     .execute(|input: Lookup, _ctx| async move {
    ///         let n: u32 = input.code.parse().map_err(|_| ToolError::new("not a number"))?;
    ///         let doc = serde_json::to_value(n)?;
    ///         Ok(doc)
    ///     });
    /// # let _ = tool;
    /// ```
    pub fn execute<I, O, F, Fut>(self, f: F) -> FnTool
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let input_schema = self.input_schema.clone().unwrap_or_else(schema_of::<I>);
        let tool_id = self.id.clone();
        let f = Arc::new(f);
        let exec: Arc<ExecFn> = Arc::new(move |input: Value, ctx: ToolContext| {
            let f = f.clone();
            let tool_id = tool_id.clone();
            async move {
                let input: I = serde_json::from_value(input).map_err(|e| {
                    ToolError::new(format!("Invalid input for tool {tool_id:?}: {e}"))
                })?;
                let output = f(input, ctx).await?;
                Ok(serde_json::to_value(output)?)
            }
            .boxed()
        });
        self.finish(input_schema, Some(exec))
    }
}

type ExecFn =
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync;

/// A tool backed by a closure, made by [`ToolBuilder::execute`] (or a client tool, made by
/// [`ToolBuilder::client`]).
#[derive(Clone)]
pub struct FnTool {
    id: String,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    approval: ApprovalPolicy,
    suspend_schema: Option<Value>,
    resume_schema: Option<Value>,
    exec: Option<Arc<ExecFn>>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("id", &self.id)
            .field("description", &self.description)
            .field("input_schema", &self.input_schema)
            .field("approval", &self.approval)
            .field("client", &self.exec.is_none())
            .finish()
    }
}

#[async_trait::async_trait]
impl Tool for FnTool {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        match &self.exec {
            Some(exec) => exec(input, ctx).await,
            None => Err(ToolError::new(format!(
                "tool {:?} is a client tool: the caller runs it and submits its result",
                self.id
            ))),
        }
    }

    fn requires_approval(&self, input: &Value, ctx: &ApprovalContext<'_>) -> bool {
        self.approval.requires(input, ctx)
    }

    fn is_client_tool(&self) -> bool {
        self.exec.is_none()
    }

    fn suspend_schema(&self) -> Option<&Value> {
        self.suspend_schema.as_ref()
    }

    fn resume_schema(&self) -> Option<&Value> {
        self.resume_schema.as_ref()
    }
}
