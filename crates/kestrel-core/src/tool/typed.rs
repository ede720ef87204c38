//! Tools as structs: [`TypedTool`] names the input, output and error types, and every
//! `TypedTool` is a [`Tool`] an agent takes as it is.

use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{OnceLock, RwLock};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Tool, ToolContext, ToolError};
use crate::schema::schema_of;

/// A tool with typed input, output and error: implement it on a struct that holds what the
/// tool needs (a client, a connection pool), and give the struct to
/// [`crate::agent::AgentBuilder::tool`].
///
/// ```
/// use kestrel_core::tool::{ToolContext, TypedTool};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Order {
///     sku: String,
///     quantity: u32,
/// }
///
/// #[derive(Debug, thiserror::Error)]
/// enum StockError {
///     #[error("no such product: {0}")]
///     Unknown(String),
/// }
///
/// struct Stock {
///     price_cents: u64,
/// }
///
/// impl TypedTool for Stock {
///     const NAME: &'static str = "price_order";
///     const DESCRIPTION: &'static str = "Prices an order of one product";
///     type Input = Order;
///     type Output = u64;
///     type Error = StockError;
///
///     async fn call(&self, order: Order, _ctx: ToolContext) -> Result<u64, StockError> {
///         if order.sku != "kite" {
///             return Err(StockError::Unknown(order.sku));
///         }
///         Ok(self.price_cents * u64::from(order.quantity))
///     }
/// }
///
/// let agent = kestrel_core::agent::Agent::builder("shop")
///     .model(std::sync::Arc::new(kestrel_core::model::ScriptedModel::new()))
///     .tool(Stock { price_cents: 1_250 })
///     .build()
///     .unwrap();
/// assert!(agent.tools().get("price_order").is_some());
/// ```
///
/// The input's JSON schema comes from `schemars`; the model's arguments are validated against
/// it before `call`. An error becomes the call's failed result, which the model reads as the
/// error's `Display` text. For approval, suspension or a schema of your own, build the tool
/// with [`crate::tool::create_tool`] or implement [`Tool`] directly.
pub trait TypedTool: Send + Sync + 'static {
    /// The name the model calls it by (unique within an agent).
    const NAME: &'static str;
    /// What it does; the model decides from this when to call it.
    const DESCRIPTION: &'static str;
    /// The input, deserialised from the model's validated arguments.
    type Input: DeserializeOwned + JsonSchema + Send + 'static;
    /// The output, serialised to JSON for the model.
    type Output: Serialize + Send + 'static;
    /// What the tool fails with: a [`ToolError`], or any error type (its `Display` text is
    /// what the model reads).
    type Error: Into<ToolError> + Send + 'static;

    /// Runs the tool.
    fn call(
        &self,
        input: Self::Input,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// The input schema of each typed tool's input type, made once per type: a `Tool` hands out
/// its schema by reference, and a typed tool is a plain struct with nowhere to keep one.
fn input_schema_of<T: JsonSchema + 'static>() -> &'static Value {
    static SCHEMAS: OnceLock<RwLock<HashMap<TypeId, &'static Value>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Default::default);
    let id = TypeId::of::<T>();
    if let Some(schema) = schemas.read().ok().and_then(|map| map.get(&id).copied()) {
        return schema;
    }
    let mut map = match schemas.write() {
        Ok(map) => map,
        Err(poisoned) => poisoned.into_inner(),
    };
    // One schema per input type for the life of the process, like the type itself.
    map.entry(id)
        .or_insert_with(|| Box::leak(Box::new(schema_of::<T>())))
}

#[async_trait::async_trait]
impl<T: TypedTool> Tool for T {
    fn id(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        T::DESCRIPTION
    }

    fn input_schema(&self) -> &Value {
        input_schema_of::<T::Input>()
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let input: T::Input = serde_json::from_value(input)
            .map_err(|e| ToolError::new(format!("Invalid input for tool {:?}: {e}", T::NAME)))?;
        let output = self.call(input, ctx).await.map_err(Into::into)?;
        Ok(serde_json::to_value(output)?)
    }
}
