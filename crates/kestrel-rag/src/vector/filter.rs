//! Mastra's metadata filter language (MongoDB's query operators), parsed once and checked.
//!
//! A [`Filter`] is a JSON object. Its keys are metadata fields (dots reach into nested
//! objects: `"source.page"`) or the logical operators `$and`, `$or`, `$nor` (a list of
//! filters, or one) and `$not` (a filter). A field's value is a condition:
//!
//! - a string, number, boolean or `null`: equal to it (`{"category": "guide"}`);
//! - a list: equal to one of its values (Mastra's shorthand for `$in`);
//! - an object of operators, all of which must hold: `$eq $ne $gt $gte $lt $lte $in $nin $all
//!   $elemMatch $exists $regex` (with `$options`: `i m s x`) and `$not`;
//! - an object of fields: conditions on a nested object (`{"source": {"page": 3}}`).
//!
//! As in MongoDB, a condition on a field holding a list holds when it holds for one of the
//! list's elements (`{"tags": "rust"}` matches `{"tags": ["rust", "ai"]}`), a missing field
//! equals `null`, and `$ne`/`$nin` match vectors without the field. `$gt`-style comparisons
//! compare numbers with numbers and strings with strings (by code point, so ISO dates
//! order), never one with the other. Regular expressions run on the backend's engine: Rust's
//! `regex` in memory and on SQLite, PostgreSQL's on pgvector; keep to their common syntax.
//!
//! Every backend gives the same answers: the in-memory store evaluates [`Filter::matches`],
//! the SQL backends compile the same tree to SQL with every value bound as a parameter.

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The most terms (fields, operators and list values) a filter may have.
pub const MAX_FILTER_TERMS: usize = 1_000;
/// The deepest a filter may nest.
pub const MAX_FILTER_DEPTH: usize = 32;
/// The most segments a field path may have.
pub const MAX_PATH_SEGMENTS: usize = 16;
/// The longest field name or path segment, in bytes.
pub const MAX_SEGMENT_LEN: usize = 256;
/// The longest regular expression, in bytes.
pub const MAX_PATTERN_LEN: usize = 1_024;

/// Why a filter was refused: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter at {path}: {message}")]
pub struct FilterError {
    /// Where in the filter: `$` for the root, then keys (`$.category.$in`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// A checked metadata filter. Deserializes from (and serializes to) its JSON.
#[derive(Clone)]
pub struct Filter {
    source: Value,
    root: Node,
}

/// A filter as a tree: what the backends compile.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// Every child holds (`true` when empty).
    All(Vec<Node>),
    /// A child holds (`false` when empty).
    Any(Vec<Node>),
    /// The child does not hold.
    Not(Box<Node>),
    /// Every operator holds on the field at `path`.
    Field { path: Vec<String>, ops: Vec<Op> },
}

/// One condition on a field's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    /// Equal to a scalar (an element equal, for a list; a missing field equals `null`).
    Eq(Value),
    /// Not [`Op::Eq`].
    Ne(Value),
    /// Ordered against a number or a string.
    Cmp(CmpOp, Bound),
    /// Equal to one of these scalars.
    In(Vec<Value>),
    /// Not [`Op::In`].
    Nin(Vec<Value>),
    /// A list holding each of these scalars (`false` when empty).
    All(Vec<Value>),
    /// A list with an element that matches.
    ElemMatch(ElemMatch),
    /// The field is (or is not) present, `null` included.
    Exists(bool),
    /// A string matching the pattern.
    Regex(Box<Pattern>),
    /// Not all of these.
    Not(Vec<Op>),
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.rust == other.rust
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

impl CmpOp {
    /// The SQL operator.
    #[cfg_attr(not(any(feature = "sqlite", feature = "pgvector")), allow(dead_code))]
    pub(crate) fn sql(self) -> &'static str {
        match self {
            CmpOp::Gt => ">",
            CmpOp::Gte => ">=",
            CmpOp::Lt => "<",
            CmpOp::Lte => "<=",
        }
    }

    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Greater, Less};
        match self {
            CmpOp::Gt => ordering == Greater,
            CmpOp::Gte => ordering != Less,
            CmpOp::Lt => ordering == Less,
            CmpOp::Lte => ordering != Greater,
        }
    }
}

/// What a comparison compares against.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bound {
    Number(f64),
    Text(String),
}

/// `$elemMatch`'s two forms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ElemMatch {
    /// Operators on the element itself: `{"$gte": 80, "$lt": 90}`.
    Value(Vec<Op>),
    /// A filter on an element that is an object: `{"name": "a", "score": {"$gt": 1}}`.
    Fields(Box<Node>),
}

/// A compiled regular expression and the source it came from.
#[derive(Debug, Clone)]
#[cfg_attr(not(any(feature = "sqlite", feature = "pgvector")), allow(dead_code))]
pub(crate) struct Pattern {
    /// The pattern as given.
    pub(crate) source: String,
    /// MongoDB's options as given (`i m s x`).
    pub(crate) options: String,
    /// The pattern with its options, for Rust's `regex` (`(?i)...`).
    pub(crate) rust: String,
    regex: Regex,
}

impl Pattern {
    /// The pattern for PostgreSQL's `~`, with embedded options giving MongoDB's meaning:
    /// `.` stops at newlines unless `s`, `^`/`$` match at lines only with `m`.
    #[cfg_attr(not(feature = "pgvector"), allow(dead_code))]
    pub(crate) fn postgres(&self) -> String {
        let multiline = self.options.contains('m');
        let dot_all = self.options.contains('s');
        let mut flags = String::from(match (multiline, dot_all) {
            (false, false) => "p",
            (true, false) => "n",
            (false, true) => "s",
            (true, true) => "w",
        });
        if self.options.contains('i') {
            flags.push('i');
        }
        if self.options.contains('x') {
            flags.push('x');
        }
        format!("(?{flags}){}", self.source)
    }

    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

impl Filter {
    /// Parses and checks a filter. `null` and `{}` are the empty filter, which matches
    /// everything.
    pub fn parse(value: Value) -> Result<Filter, FilterError> {
        let mut budget = Budget { terms: 0 };
        let root = match &value {
            Value::Null => Node::All(Vec::new()),
            Value::Object(map) => parse_object(map, &Where::root(), 0, &mut budget)?,
            other => {
                return Err(error(
                    "$",
                    format!("a filter is a JSON object, not {}", kind(other)),
                ));
            }
        };
        Ok(Filter {
            source: value,
            root,
        })
    }

    /// Parses a filter from JSON text (the vector query tool takes it so).
    pub fn from_json_str(text: &str) -> Result<Filter, FilterError> {
        let value =
            serde_json::from_str(text).map_err(|e| error("$", format!("not valid JSON: {e}")))?;
        Filter::parse(value)
    }

    /// The empty filter.
    pub fn empty() -> Filter {
        Filter {
            source: Value::Object(Map::new()),
            root: Node::All(Vec::new()),
        }
    }

    /// Whether the filter matches everything.
    pub fn is_empty(&self) -> bool {
        matches!(&self.root, Node::All(children) if children.is_empty())
    }

    /// The filter's JSON.
    pub fn as_json(&self) -> &Value {
        &self.source
    }

    /// Whether `metadata` matches.
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        node_matches(&self.root, metadata)
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "pgvector")), allow(dead_code))]
    pub(crate) fn root(&self) -> &Node {
        &self.root
    }
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Filter({})", self.source)
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)
    }
}

impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl TryFrom<Value> for Filter {
    type Error = FilterError;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        Filter::parse(value)
    }
}

impl Serialize for Filter {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.source.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Filter::parse(value).map_err(serde::de::Error::custom)
    }
}

/// Where the parser is, for error messages.
#[derive(Clone)]
struct Where(String);

impl Where {
    fn root() -> Where {
        Where("$".to_owned())
    }

    fn key(&self, key: &str) -> Where {
        Where(format!("{}.{key}", self.0))
    }

    fn index(&self, index: usize) -> Where {
        Where(format!("{}[{index}]", self.0))
    }
}

struct Budget {
    terms: usize,
}

impl Budget {
    fn spend(&mut self, at: &Where, terms: usize) -> Result<(), FilterError> {
        self.terms += terms;
        if self.terms > MAX_FILTER_TERMS {
            return Err(error(
                &at.0,
                format!("the filter has more than {MAX_FILTER_TERMS} terms"),
            ));
        }
        Ok(())
    }
}

fn error(path: &str, message: impl Into<String>) -> FilterError {
    FilterError {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

const FIELD_OPERATORS: &[&str] = &[
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$all",
    "$elemMatch",
    "$exists",
    "$regex",
    "$options",
    "$not",
];
const LOGICAL_OPERATORS: &[&str] = &["$and", "$or", "$nor", "$not"];

fn check_depth(at: &Where, depth: usize) -> Result<(), FilterError> {
    if depth > MAX_FILTER_DEPTH {
        return Err(error(
            &at.0,
            format!("the filter nests deeper than {MAX_FILTER_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// A filter object: fields and logical operators, all of which must hold.
fn parse_object(
    map: &Map<String, Value>,
    at: &Where,
    depth: usize,
    budget: &mut Budget,
) -> Result<Node, FilterError> {
    check_depth(at, depth)?;
    let mut nodes = Vec::with_capacity(map.len());
    for (key, value) in map {
        let here = at.key(key);
        budget.spend(&here, 1)?;
        let node = match key.as_str() {
            "$and" | "$or" | "$nor" => {
                let children = match value {
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| match item {
                            Value::Object(map) => {
                                parse_object(map, &here.index(i), depth + 1, budget)
                            }
                            other => Err(error(
                                &here.index(i).0,
                                format!("{key} takes filters (objects), not {}", kind(other)),
                            )),
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    Value::Object(map) => vec![parse_object(map, &here, depth + 1, budget)?],
                    other => {
                        return Err(error(
                            &here.0,
                            format!("{key} takes a list of filters, not {}", kind(other)),
                        ));
                    }
                };
                match key.as_str() {
                    "$and" => Node::All(children),
                    "$or" => Node::Any(children),
                    _ => Node::Not(Box::new(Node::Any(children))),
                }
            }
            "$not" => match value {
                Value::Object(map) if !map.is_empty() => {
                    Node::Not(Box::new(parse_object(map, &here, depth + 1, budget)?))
                }
                Value::Object(_) => return Err(error(&here.0, "$not cannot be empty")),
                other => {
                    return Err(error(
                        &here.0,
                        format!("$not takes a filter (an object), not {}", kind(other)),
                    ));
                }
            },
            operator if FIELD_OPERATORS.contains(&operator) => {
                return Err(error(
                    &here.0,
                    format!(
                        "{operator} is a field operator: put it under a field, as in \
                         {{\"field\": {{\"{operator}\": ...}}}}"
                    ),
                ));
            }
            operator if operator.starts_with('$') => {
                return Err(error(&here.0, format!("unsupported operator {operator}")));
            }
            field => parse_field(split_path(field, &here)?, value, &here, depth + 1, budget)?,
        };
        nodes.push(node);
    }
    Ok(single_or_all(nodes))
}

fn single_or_all(mut nodes: Vec<Node>) -> Node {
    if nodes.len() == 1
        && let Some(node) = nodes.pop()
    {
        return node;
    }
    Node::All(nodes)
}

fn split_path(field: &str, at: &Where) -> Result<Vec<String>, FilterError> {
    let segments: Vec<String> = field.split('.').map(str::to_owned).collect();
    if segments.len() > MAX_PATH_SEGMENTS {
        return Err(error(
            &at.0,
            format!("a field path has at most {MAX_PATH_SEGMENTS} segments"),
        ));
    }
    for segment in &segments {
        if segment.is_empty()
            || segment.len() > MAX_SEGMENT_LEN
            || segment.starts_with('$')
            || segment
                .chars()
                .any(|c| c == '"' || c == '\\' || c.is_control())
        {
            return Err(error(
                &at.0,
                format!(
                    "{field:?} is not a valid field name: dot-separated names of 1 to \
                     {MAX_SEGMENT_LEN} bytes, not starting with '$', without quotes, \
                     backslashes or control characters"
                ),
            ));
        }
    }
    Ok(segments)
}

/// A field's condition.
fn parse_field(
    path: Vec<String>,
    value: &Value,
    at: &Where,
    depth: usize,
    budget: &mut Budget,
) -> Result<Node, FilterError> {
    check_depth(at, depth)?;
    match value {
        Value::Array(items) => Ok(Node::Field {
            path,
            ops: vec![Op::In(scalars("$in", items, at, budget)?)],
        }),
        Value::Object(map) if map.is_empty() => Err(error(
            &at.0,
            "an empty condition: give a value or an operator",
        )),
        Value::Object(map) => {
            let operators = map.keys().filter(|k| k.starts_with('$')).count();
            if operators == map.len() {
                Ok(Node::Field {
                    path,
                    ops: parse_ops(map, at, depth, budget)?,
                })
            } else if operators == 0 {
                let mut nodes = Vec::with_capacity(map.len());
                for (key, value) in map {
                    let here = at.key(key);
                    budget.spend(&here, 1)?;
                    let mut nested = path.clone();
                    nested.extend(split_path(key, &here)?);
                    if nested.len() > MAX_PATH_SEGMENTS {
                        return Err(error(
                            &here.0,
                            format!("a field path has at most {MAX_PATH_SEGMENTS} segments"),
                        ));
                    }
                    nodes.push(parse_field(nested, value, &here, depth + 1, budget)?);
                }
                Ok(single_or_all(nodes))
            } else {
                Err(error(
                    &at.0,
                    "a condition mixes operators ($...) and field names",
                ))
            }
        }
        scalar => Ok(Node::Field {
            path,
            ops: vec![Op::Eq(scalar.clone())],
        }),
    }
}

/// An object of field operators, all of which must hold.
fn parse_ops(
    map: &Map<String, Value>,
    at: &Where,
    depth: usize,
    budget: &mut Budget,
) -> Result<Vec<Op>, FilterError> {
    check_depth(at, depth)?;
    let mut ops = Vec::with_capacity(map.len());
    if map.contains_key("$options") && !map.contains_key("$regex") {
        return Err(error(&at.key("$options").0, "$options needs $regex"));
    }
    for (key, value) in map {
        let here = at.key(key);
        budget.spend(&here, 1)?;
        let op = match key.as_str() {
            "$eq" => Op::Eq(scalar(key, value, &here)?),
            "$ne" => Op::Ne(scalar(key, value, &here)?),
            "$gt" | "$gte" | "$lt" | "$lte" => {
                let op = match key.as_str() {
                    "$gt" => CmpOp::Gt,
                    "$gte" => CmpOp::Gte,
                    "$lt" => CmpOp::Lt,
                    _ => CmpOp::Lte,
                };
                let bound = match value {
                    Value::Number(n) => Bound::Number(n.as_f64().unwrap_or(f64::NAN)),
                    Value::String(s) => Bound::Text(s.clone()),
                    other => {
                        return Err(error(
                            &here.0,
                            format!(
                                "{key} compares with a number or a string, not {}",
                                kind(other)
                            ),
                        ));
                    }
                };
                Op::Cmp(op, bound)
            }
            "$in" | "$nin" | "$all" => {
                let list = match value {
                    Value::Array(items) => scalars(key, items, &here, budget)?,
                    // Mastra's shorthand: one value for a list of one.
                    one => vec![scalar(key, one, &here)?],
                };
                match key.as_str() {
                    "$in" => Op::In(list),
                    "$nin" => Op::Nin(list),
                    _ => Op::All(list),
                }
            }
            "$elemMatch" => match value {
                Value::Object(inner) if !inner.is_empty() => {
                    let field_ops = inner
                        .keys()
                        .all(|k| FIELD_OPERATORS.contains(&k.as_str()) && k != "$not");
                    if field_ops {
                        Op::ElemMatch(ElemMatch::Value(parse_ops(
                            inner,
                            &here,
                            depth + 1,
                            budget,
                        )?))
                    } else {
                        Op::ElemMatch(ElemMatch::Fields(Box::new(parse_object(
                            inner,
                            &here,
                            depth + 1,
                            budget,
                        )?)))
                    }
                }
                _ => {
                    return Err(error(
                        &here.0,
                        "$elemMatch requires an object with conditions",
                    ));
                }
            },
            "$exists" => match value {
                Value::Bool(exists) => Op::Exists(*exists),
                other => {
                    return Err(error(
                        &here.0,
                        format!("$exists takes true or false, not {}", kind(other)),
                    ));
                }
            },
            "$regex" => {
                let options = match map.get("$options") {
                    None => "",
                    Some(Value::String(options)) => options.as_str(),
                    Some(other) => {
                        return Err(error(
                            &at.key("$options").0,
                            format!("$options is a string of flags, not {}", kind(other)),
                        ));
                    }
                };
                Op::Regex(Box::new(pattern(value, options, &here)?))
            }
            "$options" => continue,
            "$not" => match value {
                Value::Object(inner) if !inner.is_empty() => {
                    if !inner.keys().all(|k| k.starts_with('$')) {
                        return Err(error(
                            &here.0,
                            "$not under a field takes operators, as in {\"$not\": {\"$eq\": 1}}",
                        ));
                    }
                    Op::Not(parse_ops(inner, &here, depth + 1, budget)?)
                }
                Value::Object(_) => return Err(error(&here.0, "$not cannot be empty")),
                other => {
                    return Err(error(
                        &here.0,
                        format!("$not takes an object of operators, not {}", kind(other)),
                    ));
                }
            },
            operator if LOGICAL_OPERATORS.contains(&operator) => {
                return Err(error(
                    &here.0,
                    format!("the logical operator {operator} cannot be used under a field"),
                ));
            }
            operator => {
                return Err(error(&here.0, format!("unsupported operator {operator}")));
            }
        };
        ops.push(op);
    }
    Ok(ops)
}

fn scalar(operator: &str, value: &Value, at: &Where) -> Result<Value, FilterError> {
    match value {
        Value::Array(_) | Value::Object(_) => Err(error(
            &at.0,
            format!(
                "{operator} takes a string, number, boolean or null, not {}",
                kind(value)
            ),
        )),
        scalar => Ok(scalar.clone()),
    }
}

fn scalars(
    operator: &str,
    items: &[Value],
    at: &Where,
    budget: &mut Budget,
) -> Result<Vec<Value>, FilterError> {
    budget.spend(at, items.len())?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| scalar(operator, item, &at.index(i)))
        .collect()
}

fn pattern(value: &Value, options: &str, at: &Where) -> Result<Pattern, FilterError> {
    let Value::String(source) = value else {
        return Err(error(
            &at.0,
            format!("$regex takes a pattern string, not {}", kind(value)),
        ));
    };
    if source.len() > MAX_PATTERN_LEN {
        return Err(error(
            &at.0,
            format!("the pattern is longer than {MAX_PATTERN_LEN} bytes"),
        ));
    }
    if let Some(flag) = options.chars().find(|c| !"imsx".contains(*c)) {
        return Err(error(
            &at.0,
            format!("unknown $options flag {flag:?}: use i, m, s or x"),
        ));
    }
    let mut flags: Vec<char> = options.chars().collect();
    flags.sort_unstable();
    flags.dedup();
    let options: String = flags.into_iter().collect();
    let rust = if options.is_empty() {
        source.clone()
    } else {
        format!("(?{options}){source}")
    };
    let regex = regex::RegexBuilder::new(&rust)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| error(&at.0, format!("not a valid regular expression: {e}")))?;
    Ok(Pattern {
        source: source.clone(),
        options,
        rust,
        regex,
    })
}

// ----- evaluation (the in-memory store; the SQL backends compile the same rules) -----

fn node_matches(node: &Node, metadata: &Map<String, Value>) -> bool {
    match node {
        Node::All(children) => children.iter().all(|c| node_matches(c, metadata)),
        Node::Any(children) => children.iter().any(|c| node_matches(c, metadata)),
        Node::Not(child) => !node_matches(child, metadata),
        Node::Field { path, ops } => {
            let value = lookup(metadata, path);
            ops.iter().all(|op| op_matches(op, value))
        }
    }
}

fn lookup<'a>(metadata: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = metadata.get(first)?;
    for segment in rest {
        value = value.as_object()?.get(segment)?;
    }
    Some(value)
}

/// The values a condition is tried on: a list's elements, a scalar itself, `null` for a
/// missing field, nothing for an object.
fn elements(value: Option<&Value>) -> &[Value] {
    const NULL: &[Value] = &[Value::Null];
    match value {
        None => NULL,
        Some(Value::Array(items)) => items,
        Some(Value::Object(_)) => &[],
        Some(scalar) => std::slice::from_ref(scalar),
    }
}

/// Equality of a stored scalar and a filter scalar: numbers by value, others exactly.
pub(crate) fn scalar_eq(stored: &Value, wanted: &Value) -> bool {
    match (stored, wanted) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

fn op_matches(op: &Op, value: Option<&Value>) -> bool {
    match op {
        Op::Eq(wanted) => elements(value).iter().any(|e| scalar_eq(e, wanted)),
        Op::Ne(wanted) => !elements(value).iter().any(|e| scalar_eq(e, wanted)),
        Op::Cmp(op, bound) => elements(value).iter().any(|e| match (e, bound) {
            (Value::Number(n), Bound::Number(b)) => n
                .as_f64()
                .and_then(|n| n.partial_cmp(b))
                .is_some_and(|ordering| op.holds(ordering)),
            (Value::String(s), Bound::Text(b)) => op.holds(s.as_str().cmp(b.as_str())),
            _ => false,
        }),
        Op::In(list) => elements(value)
            .iter()
            .any(|e| list.iter().any(|w| scalar_eq(e, w))),
        Op::Nin(list) => !elements(value)
            .iter()
            .any(|e| list.iter().any(|w| scalar_eq(e, w))),
        Op::All(list) => {
            !list.is_empty()
                && value.is_some()
                && list
                    .iter()
                    .all(|w| elements(value).iter().any(|e| scalar_eq(e, w)))
        }
        Op::ElemMatch(matcher) => match value {
            Some(Value::Array(items)) => items.iter().any(|item| match matcher {
                ElemMatch::Value(ops) => ops.iter().all(|op| op_matches(op, Some(item))),
                ElemMatch::Fields(node) => item
                    .as_object()
                    .is_some_and(|object| node_matches(node, object)),
            }),
            _ => false,
        },
        Op::Exists(exists) => value.is_some() == *exists,
        Op::Regex(pattern) => elements(value)
            .iter()
            .any(|e| e.as_str().is_some_and(|s| pattern.is_match(s))),
        Op::Not(ops) => !ops.iter().all(|op| op_matches(op, value)),
    }
}
