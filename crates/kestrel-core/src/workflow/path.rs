//! Where a suspended step is when workflows nest: a nesting step's suspend payload names the
//! inner step's path under [`META`]. A leaf, read by the engine and by nested workflows.

use serde_json::Value;

/// The key of the path under which a nesting step's suspend payload names the inner step.
pub(crate) const META: &str = "__workflow_meta";

/// A suspended step's path: its id, then the path its payload names inside it (a nested
/// workflow's).
pub(crate) fn path_of(id: &str, payload: &Value) -> Vec<String> {
    let mut path = vec![id.to_owned()];
    if let Some(inner) = payload
        .get(META)
        .and_then(|meta| meta.get("path"))
        .and_then(Value::as_array)
    {
        path.extend(inner.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    path
}
