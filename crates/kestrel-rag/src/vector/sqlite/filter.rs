//! Filters compiled to SQLite: JSON paths and values are bound parameters (`?N`), never text
//! spliced into the statement.
//!
//! A condition on a field runs over the field's elements with `json_each(metadata, path)`
//! (a list's elements, or the scalar itself); a missing field counts as `null`, as in
//! [`Filter::matches`](crate::vector::Filter::matches).

use rusqlite::types::Value as SqlValue;
use serde_json::Value;

use crate::vector::filter::{Bound, ElemMatch, Node, Op};

/// A WHERE condition and its parameters.
pub(crate) struct Compiled {
    pub(crate) sql: String,
    pub(crate) params: Vec<SqlValue>,
}

/// Compiles `node` on the `metadata` column; parameters are numbered after `first_param - 1`
/// parameters the caller binds itself.
pub(crate) fn compile(node: &Node, first_param: usize) -> Compiled {
    let mut compiler = Compiler {
        params: Vec::new(),
        offset: first_param - 1,
        aliases: 0,
    };
    let sql = compiler.node(node, &Root::metadata());
    Compiled {
        sql,
        params: compiler.params,
    }
}

struct Compiler {
    params: Vec<SqlValue>,
    offset: usize,
    aliases: usize,
}

/// Where a node's field paths start: a JSON document and a path expression into it.
#[derive(Clone)]
struct Root {
    /// The JSON document (`metadata`).
    document: &'static str,
    /// A SQL expression of the JSON path of the object the fields are in (`'$'`, or an
    /// element's `fullkey`).
    path: String,
}

impl Root {
    fn metadata() -> Root {
        Root {
            document: "metadata",
            path: "'$'".to_owned(),
        }
    }
}

/// A value a condition applies to: `json_type(document, path)` and friends.
struct Subject {
    document: &'static str,
    path: String,
}

fn json_path_suffix(segments: &[String]) -> String {
    // Segments never hold `"` or `\` (the parser refuses them), so quoting is enough.
    segments.iter().map(|s| format!(".\"{s}\"")).collect()
}

impl Compiler {
    fn bind(&mut self, value: SqlValue) -> String {
        self.params.push(value);
        format!("?{}", self.offset + self.params.len())
    }

    fn alias(&mut self) -> String {
        self.aliases += 1;
        format!("e{}", self.aliases)
    }

    fn node(&mut self, node: &Node, root: &Root) -> String {
        match node {
            Node::All(children) if children.is_empty() => "1".to_owned(),
            Node::Any(children) if children.is_empty() => "0".to_owned(),
            Node::All(children) => self.join(children, root, " AND "),
            Node::Any(children) => self.join(children, root, " OR "),
            Node::Not(child) => format!("(NOT {})", self.node(child, root)),
            Node::Field { path, ops } => {
                let suffix = self.bind(SqlValue::Text(json_path_suffix(path)));
                let subject = Subject {
                    document: root.document,
                    path: format!("({} || {suffix})", root.path),
                };
                self.ops(ops, &subject)
            }
        }
    }

    fn join(&mut self, children: &[Node], root: &Root, separator: &str) -> String {
        let parts: Vec<String> = children.iter().map(|c| self.node(c, root)).collect();
        format!("({})", parts.join(separator))
    }

    fn ops(&mut self, ops: &[Op], subject: &Subject) -> String {
        let parts: Vec<String> = ops.iter().map(|op| self.op(op, subject)).collect();
        format!("({})", parts.join(" AND "))
    }

    /// `EXISTS` an element of the subject satisfying `condition(alias)`.
    fn any_element(
        &mut self,
        subject: &Subject,
        condition: impl FnOnce(&mut Self, &str) -> String,
    ) -> String {
        let alias = self.alias();
        let condition = condition(self, &alias);
        format!(
            "EXISTS (SELECT 1 FROM json_each({doc}, {path}) AS {alias} \
             WHERE json_type({doc}, {path}) IS NOT 'object' AND {condition})",
            doc = subject.document,
            path = subject.path,
        )
    }

    fn missing(subject: &Subject) -> String {
        format!("json_type({}, {}) IS NULL", subject.document, subject.path)
    }

    /// The element `alias` equals `value`.
    fn element_eq(&mut self, alias: &str, value: &Value) -> String {
        match value {
            Value::Null => format!("{alias}.type = 'null'"),
            Value::Bool(true) => format!("{alias}.type = 'true'"),
            Value::Bool(false) => format!("{alias}.type = 'false'"),
            Value::Number(n) => {
                let p = self.bind(SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)));
                format!("({alias}.type IN ('integer', 'real') AND {alias}.value = {p})")
            }
            Value::String(s) => {
                let p = self.bind(SqlValue::Text(s.clone()));
                format!("({alias}.type = 'text' AND {alias}.value = {p})")
            }
            // The parser lets only scalars through.
            Value::Array(_) | Value::Object(_) => "0".to_owned(),
        }
    }

    /// The subject equals one of `values` (an element does; a missing field is `null`).
    /// Never true, but naming the subject: SQLite refuses a statement that leaves one of its
    /// numbered parameters unused.
    fn never(subject: &Subject) -> String {
        format!("({} AND 0)", Self::missing(subject))
    }

    fn in_list(&mut self, subject: &Subject, values: &[Value]) -> String {
        if values.is_empty() {
            return Self::never(subject);
        }
        let any = self.any_element(subject, |this, alias| {
            let parts: Vec<String> = values.iter().map(|v| this.element_eq(alias, v)).collect();
            format!("({})", parts.join(" OR "))
        });
        if values.iter().any(Value::is_null) {
            format!("({any} OR {})", Self::missing(subject))
        } else {
            format!("({any})")
        }
    }

    fn op(&mut self, op: &Op, subject: &Subject) -> String {
        match op {
            Op::Eq(value) => self.in_list(subject, std::slice::from_ref(value)),
            Op::Ne(value) => format!(
                "(NOT {})",
                self.in_list(subject, std::slice::from_ref(value))
            ),
            Op::In(values) => self.in_list(subject, values),
            Op::Nin(values) => format!("(NOT {})", self.in_list(subject, values)),
            Op::Cmp(op, bound) => self.any_element(subject, |this, alias| match bound {
                Bound::Number(n) => {
                    let p = this.bind(SqlValue::Real(*n));
                    format!(
                        "({alias}.type IN ('integer', 'real') AND {alias}.value {} {p})",
                        op.sql()
                    )
                }
                Bound::Text(text) => {
                    let p = this.bind(SqlValue::Text(text.clone()));
                    // BINARY collation: byte order, which is code point order in UTF-8.
                    format!(
                        "({alias}.type = 'text' AND {alias}.value {} {p} COLLATE BINARY)",
                        op.sql()
                    )
                }
            }),
            Op::All(values) => {
                if values.is_empty() {
                    return Self::never(subject);
                }
                let parts: Vec<String> = values
                    .iter()
                    .map(|v| self.any_element(subject, |this, alias| this.element_eq(alias, v)))
                    .collect();
                format!(
                    "(json_type({}, {}) IS NOT NULL AND {})",
                    subject.document,
                    subject.path,
                    parts.join(" AND ")
                )
            }
            Op::ElemMatch(matcher) => {
                let alias = self.alias();
                let condition = match matcher {
                    ElemMatch::Value(ops) => {
                        let element = Subject {
                            document: subject.document,
                            path: format!("{alias}.fullkey"),
                        };
                        self.ops(ops, &element)
                    }
                    ElemMatch::Fields(node) => {
                        let root = Root {
                            document: subject.document,
                            path: format!("{alias}.fullkey"),
                        };
                        format!("({alias}.type = 'object' AND {})", self.node(node, &root))
                    }
                };
                format!(
                    "(json_type({doc}, {path}) IS 'array' AND EXISTS (SELECT 1 FROM \
                     json_each({doc}, {path}) AS {alias} WHERE {condition}))",
                    doc = subject.document,
                    path = subject.path,
                )
            }
            Op::Exists(true) => format!("(NOT {})", Self::missing(subject)),
            Op::Exists(false) => format!("({})", Self::missing(subject)),
            Op::Regex(pattern) => {
                let p = self.bind(SqlValue::Text(pattern.rust.clone()));
                self.any_element(subject, |_, alias| {
                    format!("({alias}.type = 'text' AND kestrel_regexp({p}, {alias}.value))")
                })
            }
            Op::Not(ops) => format!("(NOT {})", self.ops(ops, subject)),
        }
    }
}
