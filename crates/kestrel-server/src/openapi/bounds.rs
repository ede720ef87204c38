//! The bounds a route's documented body states, enforced on the body itself.
//!
//! The document says how long a body's strings, arrays and maps may be (`maxLength`,
//! `maxItems`, `maxProperties`, and `propertyNames.maxLength` for a map's keys). [`Bounds`]
//! is compiled once per route, when the routes are registered, from the very schema the
//! document shows for the route's body, and [`crate::wire::Body`] checks each body against
//! it. The document and the check cannot disagree: a bound written on a body type
//! (`#[schemars(length(max = …))]`) is enforced by being written.
//!
//! Only bounds are checked here. Types, required fields, patterns and the rest are for the
//! handlers' `serde` types to refuse. Where a schema offers alternatives (`anyOf`, `oneOf`:
//! an untagged enum, an `Option`), a value is held to the alternatives whose type (and
//! required properties, and `const`s) it has, and passes when one of them has no bound it
//! breaks.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value};

/// Where the document's schemas live, as `$ref`s name them.
const DEFINITIONS: &str = "#/components/schemas/";

/// A node of [`Bounds`], by its index.
type NodeId = usize;

/// The JSON types a schema admits, as bits.
type Types = u8;
const NULL: Types = 1;
const BOOLEAN: Types = 2;
const OBJECT: Types = 4;
const ARRAY: Types = 8;
const NUMBER: Types = 16;
const STRING: Types = 32;

fn type_of(value: &Value) -> Types {
    match value {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Object(_) => OBJECT,
        Value::Array(_) => ARRAY,
        Value::Number(_) => NUMBER,
        Value::String(_) => STRING,
    }
}

fn type_named(name: &str) -> Types {
    match name {
        "null" => NULL,
        "boolean" => BOOLEAN,
        "object" => OBJECT,
        "array" => ARRAY,
        "number" | "integer" => NUMBER,
        "string" => STRING,
        _ => 0,
    }
}

/// One schema, reduced to what the check needs.
#[derive(Debug, Default)]
struct Node {
    /// The types it admits (`None`: any).
    types: Option<Types>,
    /// The values it admits (`const`, `enum`).
    values: Option<Vec<Value>>,
    /// Properties an object must have.
    required: Vec<String>,
    max_length: Option<usize>,
    max_items: Option<usize>,
    max_properties: Option<usize>,
    /// `propertyNames.maxLength`: how long a map's keys may be.
    max_key_length: Option<usize>,
    items: Option<NodeId>,
    properties: BTreeMap<String, NodeId>,
    additional: Option<NodeId>,
    /// `anyOf` and `oneOf`: the value is one of each list's alternatives.
    alternatives: Vec<Vec<NodeId>>,
    /// `allOf` and `$ref`: the value is each of these too.
    also: Vec<NodeId>,
    /// Whether a bound can be reached from here; a node without one is not walked.
    bounded: bool,
}

impl Node {
    fn own_bound(&self) -> bool {
        self.max_length.is_some()
            || self.max_items.is_some()
            || self.max_properties.is_some()
            || self.max_key_length.is_some()
    }

    /// The fewest bytes of JSON that break one of this node's own bounds: a string of
    /// `max + 1` characters in its quotes; `max + 1` items of a byte each, with their commas
    /// and brackets; `max + 1` members `"":0`, with commas and braces; a member whose key has
    /// `max + 1` characters, in braces. Whitespace and escapes only add bytes (and a repeated
    /// key makes no new entry).
    fn smallest_past(&self) -> usize {
        let past = |max: Option<usize>, size: fn(usize) -> usize| {
            max.map_or(usize::MAX, |max| size(max.saturating_add(1)))
        };
        [
            past(self.max_length, |n| n.saturating_add(2)),
            past(self.max_items, |n| n.saturating_mul(2).saturating_add(1)),
            past(self.max_properties, |n| {
                n.saturating_mul(5).saturating_add(1)
            }),
            past(self.max_key_length, |n| n.saturating_add(6)),
        ]
        .into_iter()
        .min()
        .unwrap_or(usize::MAX)
    }

    fn children(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.items
            .iter()
            .chain(self.properties.values())
            .chain(self.additional.iter())
            .chain(self.alternatives.iter().flatten())
            .chain(self.also.iter())
            .copied()
    }
}

/// The bounds of one body schema, compiled. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Bounds(Arc<Compiled>);

#[derive(Debug)]
struct Compiled {
    /// The root is the first.
    nodes: Vec<Node>,
    /// The fewest bytes a body past one of the bounds has: a shorter one is not walked (nor
    /// parsed again).
    smallest: usize,
}

/// A value past a bound: where, and what the bound is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The field, as `memory.thread`, `tools[3]` (empty: the body itself).
    field: String,
    /// What is wrong with it.
    problem: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "the body {}", self.problem)
        } else {
            write!(f, "{}: {}", self.field, self.problem)
        }
    }
}

impl Bounds {
    /// The bounds `schema` states, its `$ref`s read in `definitions` (the document's
    /// `components/schemas`); `None` when it states none.
    pub(crate) fn compile(schema: &Value, definitions: &Map<String, Value>) -> Option<Self> {
        let mut compiler = Compiler {
            nodes: Vec::new(),
            named: HashMap::new(),
            definitions,
        };
        let root = compiler.alloc();
        compiler.fill(root, schema);
        let mut nodes = compiler.nodes;
        // A bound is reachable from a node when it has one or a child reaches one.
        let mut changed = true;
        while changed {
            changed = false;
            for id in 0..nodes.len() {
                if !nodes[id].bounded
                    && (nodes[id].own_bound() || nodes[id].children().any(|c| nodes[c].bounded))
                {
                    nodes[id].bounded = true;
                    changed = true;
                }
            }
        }
        if !nodes[root].bounded {
            return None;
        }
        let smallest = nodes
            .iter()
            .map(Node::smallest_past)
            .min()
            .unwrap_or(usize::MAX);
        Some(Bounds(Arc::new(Compiled { nodes, smallest })))
    }

    /// Whether a body of `len` bytes may break a bound at all.
    pub(crate) fn may_break(&self, len: usize) -> bool {
        len >= self.0.smallest
    }

    /// The first value of `body` past a bound, if any.
    pub(crate) fn check(&self, body: &Value) -> Result<(), Violation> {
        let mut path = Vec::new();
        match self.walk(0, body, &mut path) {
            Some(violation) => Err(violation),
            None => Ok(()),
        }
    }

    fn walk<'v>(
        &self,
        id: NodeId,
        value: &'v Value,
        path: &mut Vec<Segment<'v>>,
    ) -> Option<Violation> {
        let node = &self.0.nodes[id];
        if !node.bounded {
            return None;
        }
        let past = |problem: String| {
            Some(Violation {
                field: field_name(path),
                problem,
            })
        };
        match value {
            Value::String(text) => {
                if let Some(max) = node.max_length
                    && text.len() > max
                {
                    let length = text.chars().count();
                    if length > max {
                        return past(format!(
                            "may be at most {max} characters long (this one has {length})"
                        ));
                    }
                }
            }
            Value::Array(items) => {
                if let Some(max) = node.max_items
                    && items.len() > max
                {
                    return past(format!(
                        "may hold at most {max} items (this one has {})",
                        items.len()
                    ));
                }
                if let Some(item) = node.items.filter(|&item| self.0.nodes[item].bounded) {
                    for (index, value) in items.iter().enumerate() {
                        path.push(Segment::Index(index));
                        let found = self.walk(item, value, path);
                        path.pop();
                        if found.is_some() {
                            return found;
                        }
                    }
                }
            }
            Value::Object(members) => {
                if let Some(max) = node.max_properties
                    && members.len() > max
                {
                    return past(format!(
                        "may have at most {max} entries (this one has {})",
                        members.len()
                    ));
                }
                if let Some(max) = node.max_key_length {
                    for key in members.keys() {
                        let length = key.chars().count();
                        if length > max {
                            return past(format!(
                                "its keys may be at most {max} characters long (one has {length})"
                            ));
                        }
                    }
                }
                for (key, value) in members {
                    let Some(member) = node.properties.get(key).copied().or(node.additional) else {
                        continue;
                    };
                    if !self.0.nodes[member].bounded {
                        continue;
                    }
                    path.push(Segment::Key(key));
                    let found = self.walk(member, value, path);
                    path.pop();
                    if found.is_some() {
                        return found;
                    }
                }
            }
            _ => {}
        }
        for &also in &node.also {
            let found = self.walk(also, value, path);
            if found.is_some() {
                return found;
            }
        }
        for alternatives in &node.alternatives {
            let mut first = None;
            let mut passed = false;
            for &alternative in alternatives {
                if !self.admits(alternative, value, 0) {
                    continue;
                }
                match self.walk(alternative, value, path) {
                    None => {
                        passed = true;
                        break;
                    }
                    Some(violation) => {
                        first.get_or_insert(violation);
                    }
                }
            }
            // None admits the value: its type is for serde to refuse.
            if !passed && first.is_some() {
                return first;
            }
        }
        None
    }

    /// Whether `value` has the shape of node `id`: its type, its `const`, an object's
    /// required properties and (near the top) its properties' types. What chooses among
    /// alternatives; it is no validation.
    fn admits(&self, id: NodeId, value: &Value, depth: usize) -> bool {
        // Deep enough to tell an untagged enum's variants apart.
        const DEPTH: usize = 4;
        if depth > DEPTH {
            return true;
        }
        let node = &self.0.nodes[id];
        if node.types.is_some_and(|types| types & type_of(value) == 0) {
            return false;
        }
        if node.values.as_ref().is_some_and(|v| !v.contains(value)) {
            return false;
        }
        if let Value::Object(members) = value {
            if !node.required.iter().all(|key| members.contains_key(key)) {
                return false;
            }
            // Properties are looked at on the alternative itself and on the schema it names
            // (`$ref`), not deeper.
            if depth < 2
                && members.iter().any(|(key, member)| {
                    node.properties
                        .get(key)
                        .is_some_and(|&p| !self.admits(p, member, depth + 2))
                })
            {
                return false;
            }
        }
        node.also.iter().all(|&a| self.admits(a, value, depth + 1))
            && node.alternatives.iter().all(|alternatives| {
                alternatives
                    .iter()
                    .any(|&a| self.admits(a, value, depth + 1))
            })
    }
}

/// A step of the path to a value.
#[derive(Debug, Clone, Copy)]
enum Segment<'v> {
    Key(&'v str),
    Index(usize),
}

/// `memory.thread`, `tools[3]`; a long key is cut (it may be what is too long).
fn field_name(path: &[Segment<'_>]) -> String {
    const KEY: usize = 64;
    let mut name = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !name.is_empty() {
                    name.push('.');
                }
                if key.chars().count() > KEY {
                    name.extend(key.chars().take(KEY));
                    name.push('…');
                } else {
                    name.push_str(key);
                }
            }
            Segment::Index(index) => {
                name.push('[');
                name.push_str(&index.to_string());
                name.push(']');
            }
        }
    }
    name
}

struct Compiler<'d> {
    nodes: Vec<Node>,
    /// The node of each definition compiled so far (recursive schemas end here).
    named: HashMap<String, NodeId>,
    definitions: &'d Map<String, Value>,
}

impl Compiler<'_> {
    fn alloc(&mut self) -> NodeId {
        self.nodes.push(Node::default());
        self.nodes.len() - 1
    }

    fn compile(&mut self, schema: &Value) -> NodeId {
        let id = self.alloc();
        self.fill(id, schema);
        id
    }

    /// The node of the definition `reference` names; an unknown one bounds nothing.
    fn reference(&mut self, reference: &str) -> NodeId {
        if let Some(&id) = self.named.get(reference) {
            return id;
        }
        let id = self.alloc();
        self.named.insert(reference.to_owned(), id);
        let definition = reference
            .strip_prefix(DEFINITIONS)
            .and_then(|name| self.definitions.get(name));
        if let Some(definition) = definition {
            self.fill(id, definition);
        }
        id
    }

    fn fill(&mut self, id: NodeId, schema: &Value) {
        // `true`, `false` and anything else that is not an object bound nothing.
        let Some(schema) = schema.as_object() else {
            return;
        };
        let bound = |key: &str| {
            schema
                .get(key)
                .and_then(Value::as_u64)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        let mut node = Node {
            types: match schema.get("type") {
                Some(Value::String(name)) => Some(type_named(name)),
                Some(Value::Array(names)) => Some(
                    names
                        .iter()
                        .filter_map(Value::as_str)
                        .map(type_named)
                        .fold(0, |all, t| all | t),
                ),
                _ => None,
            },
            values: match (schema.get("const"), schema.get("enum")) {
                (Some(value), _) => Some(vec![value.clone()]),
                (None, Some(Value::Array(values))) => Some(values.clone()),
                _ => None,
            },
            required: schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned))
                .into_iter()
                .flatten()
                .collect(),
            max_length: bound("maxLength"),
            max_items: bound("maxItems"),
            max_properties: bound("maxProperties"),
            max_key_length: schema
                .get("propertyNames")
                .and_then(|names| names.get("maxLength"))
                .and_then(Value::as_u64)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            ..Node::default()
        };
        if let Some(items) = schema.get("items") {
            node.items = Some(self.compile(items));
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let property = self.compile(property);
                node.properties.insert(name.clone(), property);
            }
        }
        if let Some(additional) = schema.get("additionalProperties") {
            node.additional = Some(self.compile(additional));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alternatives) = schema.get(key).and_then(Value::as_array) {
                let alternatives = alternatives.iter().map(|a| self.compile(a)).collect();
                node.alternatives.push(alternatives);
            }
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for schema in all {
                let also = self.compile(schema);
                node.also.push(also);
            }
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let also = self.reference(reference);
            node.also.push(also);
        }
        self.nodes[id] = node;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn bounds(schema: Value, definitions: Value) -> Bounds {
        let definitions = definitions.as_object().cloned().unwrap_or_default();
        Bounds::compile(&schema, &definitions).unwrap()
    }

    fn problem(bounds: &Bounds, body: Value) -> Option<String> {
        bounds.check(&body).err().map(|v| v.to_string())
    }

    #[test]
    fn strings_arrays_and_maps_are_held_to_their_bounds_by_path() {
        let b = bounds(
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": ["string", "null"], "maxLength": 3},
                    "tools": {
                        "type": "array",
                        "maxItems": 2,
                        "items": {"type": "string", "maxLength": 2},
                    },
                    "map": {
                        "type": "object",
                        "maxProperties": 1,
                        "propertyNames": {"maxLength": 2},
                        "additionalProperties": {"type": "string", "maxLength": 1},
                    },
                    "free": true,
                },
            }),
            json!({}),
        );
        assert_eq!(problem(&b, json!({"name": "abc", "tools": ["ab"]})), None);
        // Characters, not bytes.
        assert_eq!(problem(&b, json!({"name": "ééé"})), None);
        assert_eq!(
            problem(&b, json!({"name": "abcd"})).unwrap(),
            "name: may be at most 3 characters long (this one has 4)"
        );
        assert_eq!(
            problem(&b, json!({"tools": ["a", "b", "c"]})).unwrap(),
            "tools: may hold at most 2 items (this one has 3)"
        );
        assert_eq!(
            problem(&b, json!({"tools": ["a", "abc"]})).unwrap(),
            "tools[1]: may be at most 2 characters long (this one has 3)"
        );
        assert_eq!(
            problem(&b, json!({"map": {"a": "x", "b": "y"}})).unwrap(),
            "map: may have at most 1 entries (this one has 2)"
        );
        assert_eq!(
            problem(&b, json!({"map": {"abc": "x"}})).unwrap(),
            "map: its keys may be at most 2 characters long (one has 3)"
        );
        assert_eq!(
            problem(&b, json!({"map": {"a": "xy"}})).unwrap(),
            "map.a: may be at most 1 characters long (this one has 2)"
        );
        // Unbounded fields and mistyped values are not this check's to refuse.
        assert_eq!(
            problem(&b, json!({"free": "x".repeat(100), "name": 7})),
            None
        );
    }

    #[test]
    fn alternatives_and_references_are_followed() {
        let b = bounds(
            json!({
                "type": "object",
                "properties": {
                    "model": {"anyOf": [{"$ref": "#/components/schemas/Model"}, {"type": "null"}]},
                    "choice": {"$ref": "#/components/schemas/Choice"},
                    "tree": {"$ref": "#/components/schemas/Tree"},
                },
            }),
            json!({
                "Model": {"anyOf": [
                    {"type": "string", "maxLength": 3},
                    {
                        "type": "object",
                        "properties": {"name": {"type": "string", "maxLength": 2}},
                        "required": ["name"],
                    },
                ]},
                "Choice": {"anyOf": [
                    {
                        "type": "object",
                        "properties": {"status": {"enum": ["draft"]}},
                        "required": ["status"],
                    },
                    {
                        "type": "object",
                        "properties": {"versionId": {"type": "string", "maxLength": 2}},
                        "required": ["versionId"],
                    },
                ]},
                "Tree": {"type": "object", "properties": {
                    "label": {"type": "string", "maxLength": 1},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}},
                }},
            }),
        );
        assert_eq!(problem(&b, json!({"model": null})), None);
        assert_eq!(problem(&b, json!({"model": "abc"})), None);
        assert_eq!(
            problem(&b, json!({"model": "abcd"})).unwrap(),
            "model: may be at most 3 characters long (this one has 4)"
        );
        assert_eq!(
            problem(&b, json!({"model": {"name": "abc"}})).unwrap(),
            "model.name: may be at most 2 characters long (this one has 3)"
        );
        // The first alternative does not admit it (no `status`): the second holds it.
        assert_eq!(
            problem(&b, json!({"choice": {"versionId": "abc"}})).unwrap(),
            "choice.versionId: may be at most 2 characters long (this one has 3)"
        );
        assert_eq!(problem(&b, json!({"choice": {"status": "draft"}})), None);
        assert_eq!(
            problem(
                &b,
                json!({"tree": {"children": [{"label": "a"}, {"children": [{"label": "ab"}]}]}})
            )
            .unwrap(),
            "tree.children[1].children[0].label: may be at most 1 characters long (this one has 2)"
        );
    }

    #[test]
    fn a_schema_without_bounds_compiles_to_nothing() {
        let schema =
            json!({"type": "object", "properties": {"data": true, "x": {"type": "string"}}});
        assert!(Bounds::compile(&schema, &Map::new()).is_none());
        let b = bounds(json!({"type": "string", "maxLength": 10}), json!({}));
        // `"` and eleven characters and `"`.
        assert!(!b.may_break(12));
        assert!(b.may_break(13));
        let b = bounds(json!({"type": "array", "maxItems": 2}), json!({}));
        // `[0,0,0]`
        assert!(!b.may_break(6));
        assert!(b.may_break(7));
    }
}
