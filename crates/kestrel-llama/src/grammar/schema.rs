//! Schema checks: what of a JSON schema the grammar can enforce, and the copy of a schema that
//! llama.cpp's converter is given.

use serde_json::{Map, Value};

use crate::error::GenerateError;

/// Keywords whose constraint the grammar cannot express. Accepting them would let the model
/// produce output that parses but does not validate.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("not", "negation cannot be expressed as a grammar"),
    ("if", "conditional schemas are not supported"),
    ("then", "conditional schemas are not supported"),
    ("else", "conditional schemas are not supported"),
    (
        "multipleOf",
        "divisibility cannot be expressed as a grammar",
    ),
    (
        "uniqueItems",
        "item uniqueness cannot be expressed as a grammar",
    ),
    ("contains", "array `contains` is not supported"),
    ("minContains", "array `contains` is not supported"),
    ("maxContains", "array `contains` is not supported"),
    (
        "patternProperties",
        "pattern-named properties are not supported",
    ),
    (
        "propertyNames",
        "property name constraints are not supported",
    ),
    (
        "dependentRequired",
        "dependent properties are not supported",
    ),
    ("dependentSchemas", "dependent schemas are not supported"),
    ("dependencies", "dependent properties are not supported"),
    ("minProperties", "property counts are not supported"),
    ("maxProperties", "property counts are not supported"),
    (
        "unevaluatedProperties",
        "unevaluated properties are not supported",
    ),
    ("unevaluatedItems", "unevaluated items are not supported"),
    (
        "additionalItems",
        "`additionalItems` is not supported; use `prefixItems`/`items`",
    ),
    ("$dynamicRef", "dynamic references are not supported"),
    ("$recursiveRef", "recursive references are not supported"),
];

/// Keywords that hold one subschema.
const SUBSCHEMA: &[&str] = &["items", "additionalProperties"];
/// Keywords that hold an array of subschemas.
const SUBSCHEMA_ARRAYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords that hold a map of subschemas.
const SUBSCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions"];
/// Numeric bounds, enforced for integers only.
const NUMBER_BOUNDS: &[&str] = &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
/// Checks `schema` (labelled `label` in errors) and returns a copy ready for the converter:
/// `true` subschemas become `{}`, and local `$ref`s are rewritten to sit under `base`.
pub(crate) fn prepare(schema: &Value, base: &str, label: &str) -> Result<Value, GenerateError> {
    check_schema(schema, schema, label, "#")?;
    Ok(rewrite(schema, base))
}

/// Rejects what the grammar cannot enforce (see [`UNSUPPORTED`]).
pub(crate) fn check_schema(
    root: &Value,
    schema: &Value,
    label: &str,
    path: &str,
) -> Result<(), GenerateError> {
    let unsupported = |feature: &str, reason: &str| GenerateError::UnsupportedSchema {
        feature: feature.to_string(),
        path: format!("{label}{}", path.trim_start_matches('#')),
        reason: reason.to_string(),
    };
    let invalid = |message: String| GenerateError::InvalidSchema {
        path: format!("{label}{}", path.trim_start_matches('#')),
        message,
    };
    let object = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => {
            return Err(unsupported(
                "false",
                "a `false` schema is only supported as `additionalProperties: false`",
            ));
        }
        Value::Object(object) => object,
        _ => return Err(invalid("a schema must be an object or a boolean".into())),
    };
    for (keyword, reason) in UNSUPPORTED {
        if object.contains_key(*keyword) {
            return Err(unsupported(keyword, reason));
        }
    }
    let types = types_of(object);
    let integer_only = !types.is_empty() && types.iter().all(|t| t == "integer");
    for bound in NUMBER_BOUNDS {
        if object.contains_key(*bound) && !integer_only {
            return Err(unsupported(
                bound,
                "numeric bounds are only enforced for `\"type\": \"integer\"`",
            ));
        }
    }
    if let Some(reference) = object.get("$ref") {
        let Some(reference) = reference.as_str() else {
            return Err(invalid("$ref must be a string".into()));
        };
        if !reference.starts_with("#/") && reference != "#" {
            return Err(unsupported(
                "$ref",
                "only references into the same schema (`#/...`) are supported",
            ));
        }
        if resolve(root, reference).is_none() {
            return Err(invalid(format!("$ref {reference:?} does not resolve")));
        }
    }
    if let Some(pattern) = object.get("pattern") {
        let Some(pattern) = pattern.as_str() else {
            return Err(invalid("pattern must be a string".into()));
        };
        check_pattern(pattern).map_err(|reason| unsupported("pattern", &reason))?;
    }
    if let Some(required) = object.get("required").and_then(Value::as_array) {
        let properties = object.get("properties").and_then(Value::as_object);
        for name in required.iter().filter_map(Value::as_str) {
            if !properties.is_some_and(|p| p.contains_key(name)) {
                return Err(unsupported(
                    "required",
                    &format!("required property {name:?} has no schema in `properties`"),
                ));
            }
        }
    }
    if let Some(all_of) = object.get("allOf").and_then(Value::as_array) {
        for member in all_of {
            let member = match member.get("$ref").and_then(Value::as_str) {
                Some(reference) => resolve(root, reference).unwrap_or(member),
                None => member,
            };
            let is_object = member.get("properties").is_some()
                || member.get("type").and_then(Value::as_str) == Some("object");
            if !is_object {
                return Err(unsupported(
                    "allOf",
                    "`allOf` is only supported when every member is an object schema",
                ));
            }
        }
    }
    for keyword in SUBSCHEMA {
        if let Some(sub) = object.get(*keyword) {
            if *keyword == "additionalProperties" && sub.is_boolean() {
                continue;
            }
            if *keyword == "items" && sub.is_array() {
                for (i, item) in sub.as_array().into_iter().flatten().enumerate() {
                    check_schema(root, item, label, &format!("{path}/items/{i}"))?;
                }
                continue;
            }
            check_schema(root, sub, label, &format!("{path}/{keyword}"))?;
        }
    }
    for keyword in SUBSCHEMA_ARRAYS {
        if let Some(subs) = object.get(*keyword) {
            let Some(subs) = subs.as_array() else {
                return Err(invalid(format!("{keyword} must be an array of schemas")));
            };
            if subs.is_empty() {
                return Err(invalid(format!("{keyword} must not be empty")));
            }
            for (i, sub) in subs.iter().enumerate() {
                check_schema(root, sub, label, &format!("{path}/{keyword}/{i}"))?;
            }
        }
    }
    for keyword in SUBSCHEMA_MAPS {
        if let Some(subs) = object.get(*keyword) {
            let Some(subs) = subs.as_object() else {
                return Err(invalid(format!("{keyword} must be an object")));
            };
            for (name, sub) in subs {
                check_schema(root, sub, label, &format!("{path}/{keyword}/{name}"))?;
            }
        }
    }
    Ok(())
}

fn types_of(object: &Map<String, Value>) -> Vec<String> {
    match object.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Resolves a local `$ref` (`#` or `#/a/b`) against `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// Whether llama.cpp's regex-to-grammar translator can express `pattern`. It needs the
/// pattern anchored with `^...$` (JSON Schema patterns match anywhere otherwise), and when it
/// meets a construct it cannot translate it silently accepts any string, so the pattern is
/// converted on its own and compared with the plain-string grammar.
fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.len() < 2 || !pattern.starts_with('^') || !pattern.ends_with('$') {
        return Err(format!(
            "pattern {pattern:?} must be anchored with ^...$ to be enforced"
        ));
    }
    let schema = serde_json::json!({ "type": "string", "pattern": pattern }).to_string();
    let with_pattern = llama_cpp_2::json_schema_to_grammar(&schema)
        .map_err(|e| format!("pattern {pattern:?} is not a valid regular expression ({e})"))?;
    let plain = llama_cpp_2::json_schema_to_grammar(r#"{"type":"string"}"#)
        .map_err(|e| format!("llama.cpp's schema converter failed ({e})"))?;
    if with_pattern == plain {
        return Err(format!(
            "pattern {pattern:?} uses regex syntax the grammar builder cannot translate"
        ));
    }
    Ok(())
}

/// Copies `schema`, turning `true` subschemas into `{}` and rebasing local `$ref`s onto `base`.
fn rewrite(schema: &Value, base: &str) -> Value {
    match schema {
        Value::Bool(true) => Value::Object(Map::new()),
        Value::Object(object) => {
            let mut out = Map::new();
            for (key, value) in object {
                let value = match key.as_str() {
                    "$ref" => match value.as_str() {
                        Some(reference) => {
                            Value::String(format!("{base}{}", reference.trim_start_matches('#')))
                        }
                        None => value.clone(),
                    },
                    "additionalProperties" if value.is_boolean() => value.clone(),
                    "items" | "additionalProperties" => rewrite(value, base),
                    "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value {
                        Value::Array(items) => {
                            Value::Array(items.iter().map(|v| rewrite(v, base)).collect())
                        }
                        other => other.clone(),
                    },
                    "properties" | "$defs" | "definitions" => match value {
                        Value::Object(map) => Value::Object(
                            map.iter()
                                .map(|(k, v)| (k.clone(), rewrite(v, base)))
                                .collect(),
                        ),
                        other => other.clone(),
                    },
                    _ => value.clone(),
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}
