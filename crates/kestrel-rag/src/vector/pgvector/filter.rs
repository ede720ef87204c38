//! Filters compiled to PostgreSQL: field names and values are bound parameters (`$N`), never
//! text spliced into the statement.
//!
//! A condition on a field runs over the field's elements (a list's elements, or the value
//! itself; a missing field counts as `null`), the rules of
//! [`Filter::matches`](crate::vector::Filter::matches). Strings order by code point
//! (`COLLATE "C"`), as in Rust and SQLite.

use serde_json::Value;

use crate::vector::filter::{Bound, ElemMatch, Node, Op};

/// A bound parameter.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Text(String),
    TextArray(Vec<String>),
    Float(f64),
    Json(Value),
}

/// A WHERE condition and its parameters.
pub(crate) struct Compiled {
    pub(crate) sql: String,
    pub(crate) params: Vec<Param>,
}

/// Compiles `node` on the `metadata` column; parameters are numbered after `first_param - 1`
/// parameters the caller binds itself.
pub(crate) fn compile(node: &Node, first_param: usize) -> Compiled {
    let mut compiler = Compiler {
        params: Vec::new(),
        offset: first_param - 1,
        aliases: 0,
    };
    let sql = compiler.node(node, "metadata");
    Compiled {
        sql,
        params: compiler.params,
    }
}

struct Compiler {
    params: Vec<Param>,
    offset: usize,
    aliases: usize,
}

impl Compiler {
    fn bind(&mut self, param: Param) -> String {
        self.params.push(param);
        format!("${}", self.offset + self.params.len())
    }

    fn alias(&mut self) -> String {
        self.aliases += 1;
        format!("e{}", self.aliases)
    }

    /// `root` is a `jsonb` expression: the metadata, or a list element.
    fn node(&mut self, node: &Node, root: &str) -> String {
        match node {
            Node::All(children) if children.is_empty() => "TRUE".to_owned(),
            Node::Any(children) if children.is_empty() => "FALSE".to_owned(),
            Node::All(children) => self.join(children, root, " AND "),
            Node::Any(children) => self.join(children, root, " OR "),
            Node::Not(child) => format!("(NOT {})", self.node(child, root)),
            Node::Field { path, ops } => {
                let mut subject = root.to_owned();
                for segment in path {
                    let p = self.bind(Param::Text(segment.clone()));
                    // `->` with a text key: never an array index, as in the other backends.
                    subject = format!("({subject} -> {p}::text)");
                }
                self.ops(ops, &subject)
            }
        }
    }

    fn join(&mut self, children: &[Node], root: &str, separator: &str) -> String {
        let parts: Vec<String> = children.iter().map(|c| self.node(c, root)).collect();
        format!("({})", parts.join(separator))
    }

    fn ops(&mut self, ops: &[Op], subject: &str) -> String {
        let parts: Vec<String> = ops.iter().map(|op| self.op(op, subject)).collect();
        format!("({})", parts.join(" AND "))
    }

    /// `EXISTS` an element of `subject` satisfying `condition(alias)`: a list's elements, an
    /// object none, anything else (a missing field's SQL `NULL` included) itself.
    fn any_element(
        &mut self,
        subject: &str,
        condition: impl FnOnce(&mut Self, &str) -> String,
    ) -> String {
        let alias = self.alias();
        let condition = condition(self, &alias);
        format!(
            "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof({subject}) \
             WHEN 'array' THEN {subject} WHEN 'object' THEN '[]'::jsonb \
             ELSE jsonb_build_array({subject}) END) AS {alias} WHERE {condition})"
        )
    }

    fn element_eq(&mut self, alias: &str, value: &Value) -> String {
        match value {
            Value::Number(n) => {
                let p = self.bind(Param::Float(n.as_f64().unwrap_or(f64::NAN)));
                // CASE, not AND: PostgreSQL may evaluate AND's operands in any order, and the
                // cast fails on a string.
                format!(
                    "(CASE WHEN jsonb_typeof({alias}) = 'number' \
                     THEN ({alias} #>> '{{}}')::float8 = {p} ELSE FALSE END)"
                )
            }
            other => {
                let p = self.bind(Param::Json(other.clone()));
                format!("({alias} = {p}::jsonb)")
            }
        }
    }

    fn in_list(&mut self, subject: &str, values: &[Value]) -> String {
        if values.is_empty() {
            return "FALSE".to_owned();
        }
        self.any_element(subject, |this, alias| {
            let parts: Vec<String> = values.iter().map(|v| this.element_eq(alias, v)).collect();
            format!("({})", parts.join(" OR "))
        })
    }

    fn op(&mut self, op: &Op, subject: &str) -> String {
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
                    let p = this.bind(Param::Float(*n));
                    format!(
                        "(CASE WHEN jsonb_typeof({alias}) = 'number' \
                         THEN ({alias} #>> '{{}}')::float8 {} {p} ELSE FALSE END)",
                        op.sql()
                    )
                }
                Bound::Text(text) => {
                    let p = this.bind(Param::Text(text.clone()));
                    format!(
                        "(CASE WHEN jsonb_typeof({alias}) = 'string' THEN ({alias} #>> '{{}}') \
                         COLLATE \"C\" {} {p}::text COLLATE \"C\" ELSE FALSE END)",
                        op.sql()
                    )
                }
            }),
            Op::All(values) => {
                if values.is_empty() {
                    return "FALSE".to_owned();
                }
                let parts: Vec<String> = values
                    .iter()
                    .map(|v| self.any_element(subject, |this, alias| this.element_eq(alias, v)))
                    .collect();
                format!("({subject} IS NOT NULL AND {})", parts.join(" AND "))
            }
            Op::ElemMatch(matcher) => {
                let alias = self.alias();
                let condition = match matcher {
                    ElemMatch::Value(ops) => self.ops(ops, &alias),
                    ElemMatch::Fields(node) => format!(
                        "(jsonb_typeof({alias}) = 'object' AND {})",
                        self.node(node, &alias)
                    ),
                };
                format!(
                    "(COALESCE(jsonb_typeof({subject}) = 'array', FALSE) AND EXISTS (SELECT 1 \
                     FROM jsonb_array_elements({subject}) AS {alias} WHERE {condition}))"
                )
            }
            Op::Exists(true) => format!("({subject} IS NOT NULL)"),
            Op::Exists(false) => format!("({subject} IS NULL)"),
            Op::Regex(pattern) => {
                let p = self.bind(Param::Text(pattern.postgres()));
                self.any_element(subject, |_, alias| {
                    format!(
                        "(CASE WHEN jsonb_typeof({alias}) = 'string' \
                         THEN ({alias} #>> '{{}}') ~ {p}::text ELSE FALSE END)"
                    )
                })
            }
            Op::Not(ops) => format!("(NOT {})", self.ops(ops, subject)),
        }
    }
}
