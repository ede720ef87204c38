//! JSON schemas: a type's schema as providers take it, and what a value breaks of one.
//!
//! Tools validate their input here, structured output its answer, memory its working-memory
//! updates.

use schemars::JsonSchema;
use serde_json::Value;

/// The JSON schema of `T`, without the `$schema` and `title` keys that providers do not need.
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut value = schemars::schema_for!(T).to_value();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
    }
    value
}

/// What is wrong with `value` under `schema`, one message per violation naming its path (or
/// the schema's own error, when it is not a valid schema); empty when it matches.
pub fn schema_errors(schema: &Value, value: &Value) -> Vec<String> {
    match compiled(schema) {
        Ok(validator) => violations(&validator, value),
        Err(e) => vec![format!("the schema is invalid: {e}")],
    }
}

/// How many compiled schemas [`compiled`] keeps.
const COMPILED_CAPACITY: usize = 256;

/// The validator of `schema`, compiled once: structured output and resume data check their
/// answers against the same few schemas again and again, and compiling one costs far more
/// than writing it out as the key. The cache is bounded (emptied when full).
fn compiled(schema: &Value) -> Result<std::sync::Arc<jsonschema::Validator>, String> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(found) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Arc::clone(found));
    }
    let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= COMPILED_CAPACITY {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&validator));
    Ok(validator)
}

/// What is wrong with `value` under `validator`: one message per violation, prefixed with the
/// JSON pointer of the offending value (none for the root); empty when it matches.
pub fn violations(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    // The common case, a valid value, is answered without building an error iterator.
    if validator.is_valid(value) {
        return Vec::new();
    }
    validator
        .iter_errors(value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect()
}

/// A model's JSON answer without the Markdown fence some models wrap it in.
pub(crate) fn unfenced(text: &str) -> &str {
    let body = text.trim();
    body.strip_prefix("```json")
        .or_else(|| body.strip_prefix("```"))
        .and_then(|b| b.strip_suffix("```"))
        .unwrap_or(body)
        .trim()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_cached_validator_judges_as_a_fresh_one_also_past_the_bound() {
        let schema = json!({"type": "object", "required": ["a"]});
        assert!(schema_errors(&schema, &json!({"a": 1})).is_empty());
        assert_eq!(
            schema_errors(&schema, &json!({})).len(),
            1,
            "the same schema, cached"
        );
        // More distinct schemas than the cache keeps: each still judges by its own rule.
        for n in 0..(COMPILED_CAPACITY + 10) {
            let schema = json!({"type": "integer", "maximum": n});
            assert!(schema_errors(&schema, &json!(n)).is_empty());
            assert_eq!(schema_errors(&schema, &json!(n + 1)).len(), 1);
        }
        assert_eq!(schema_errors(&schema, &json!({})).len(), 1);
        let invalid = json!({"type": 12});
        assert!(schema_errors(&invalid, &json!(1))[0].starts_with("the schema is invalid"));
    }
}
