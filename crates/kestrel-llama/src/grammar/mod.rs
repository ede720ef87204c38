//! Constrained decoding: GBNF grammars built from tool and response-format JSON schemas.
//!
//! The schemas are first checked by [`check_schema`], which rejects keywords the grammar cannot
//! enforce with [`GenerateError::UnsupportedSchema`] (see the module docs of the crate for the
//! list), then converted by llama.cpp's `json_schema_to_grammar` in **one** call on a wrapper
//! schema, so the rule names of different schemas cannot collide:
//!
//! ```json
//! {"type": "object", "properties": {
//!   "kestrel-calls": {"anyOf": [
//!     {"type": "object",
//!      "properties": {"name": {"const": "get_weather"}, "arguments": <input schema>},
//!      "required": ["name", "arguments"], "additionalProperties": false},
//!     ...]},
//!   "kestrel-answer": <response format schema>}}
//! ```
//!
//! Local `$ref`s inside each schema are rewritten to point into the wrapper. The wrapper's own
//! `root` rule is then replaced by:
//!
//! ```text
//! root ::= kestrel-tool-calls | kestrel-answer-rule     (tools + answer)
//! kestrel-tool-calls ::= "<tool_call>" ws (call-list | call) ws "</tool_call>"
//!                      | "```json" ws (call-list | call) ws "```"
//!                      | call-list | call            (bare calls: not beside a JSON answer)
//! call-list ::= "[" ws call ws "]"
//! ```
//!
//! (with `(ws "," ws call){0,3}` after the first call when parallel calls are allowed)
//!
//! where the answer is either a JSON value matching the response format or free text. Free text
//! beside calls must not start with `<`, `[` or `{`, nor with a fence followed by `[` or `{`,
//! so the first characters decide the branch; after that the engine drops the grammar for free
//! text (it accepts anything) and keeps it otherwise. The bare and fenced forms are there
//! because models write them: Qwen2.5-Coder-0.5B, asked for the tagged list, wrote a bare
//! `[{"name": ...}]` for 5 of 23 tool prompts, and Qwen2.5-Coder-1.5B fenced every call; without
//! these branches they became text answers.
//!
//! [`check_schema`]: schema::check_schema

mod schema;

use serde_json::Value;

use crate::error::GenerateError;
use crate::request::{Choice, ToolSpec};

use schema::prepare;

/// The literal that opens a tool-call block.
pub(crate) const CALLS_OPEN: &str = "<tool_call>";
/// The literal that closes a tool-call block.
pub(crate) const CALLS_CLOSE: &str = "</tool_call>";
/// Most calls in one block when parallel calls are allowed.
pub(crate) const MAX_PARALLEL_CALLS: usize = 4;

/// Free text: anything that does not start with `<` (which only a tool-call block does).
const TEXT_RULE: &str = r#"kestrel-text ::= [^<] [^\x00]*"#;

/// The literal that opens a fenced tool-call block (the form Qwen2.5-Coder-1.5B writes).
pub(crate) const FENCE_OPEN: &str = "```json";
/// The literal that closes a fenced tool-call block.
pub(crate) const FENCE_CLOSE: &str = "```";

/// Free text beside tool calls: it may not start with `<`, `[` or `{` either, which open a
/// call (bare calls, see [`plan`]), nor with a ```` ```json ```` fence whose first character
/// after at most two blanks is `[` or `{` (a fenced call). Any other text may start with a
/// backtick, a code block included.
const TEXT_BESIDE_CALLS_RULES: &str = r#"kestrel-text ::= [^<\[{`] kestrel-rest | "`" kestrel-text-tick
kestrel-rest ::= [^\x00]*
kestrel-text-tick ::= [^`] kestrel-rest | "`" [^`] kestrel-rest | "``" kestrel-text-fence
kestrel-text-fence ::= [^j] kestrel-rest | "j" [^s] kestrel-rest | "js" [^o] kestrel-rest | "jso" [^n] kestrel-rest | "json" kestrel-text-json
kestrel-text-json ::= [^ \n\[{] kestrel-rest | [ \n] [^ \n\[{] kestrel-rest | [ \n] [ \n] [^\[{] kestrel-rest"#;

/// Most blanks between a call block's opening literal and its calls (`kestrel-ws`).
pub(crate) const MAX_CALL_BLANKS: usize = 2;

const CALLS_KEY: &str = "kestrel-calls";
const ANSWER_KEY: &str = "kestrel-answer";

/// What the model may produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// No answer: a tool call is required.
    None,
    /// Free text.
    Text,
    /// JSON matching the response format.
    Json,
}

/// The constraints of one request.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The tools the model may call (empty: none).
    pub tools: Vec<ToolSpec>,
    /// The answer branch.
    pub answer: Answer,
    /// The grammar, when output is constrained.
    pub gbnf: Option<String>,
    /// For a call that may instead be a direct reply ([`Choice::CallOrReply`]): that option.
    pub reply: Option<Box<Reply>>,
}

impl Plan {
    /// Whether the model may call tools.
    pub fn calls(&self) -> bool {
        !self.tools.is_empty()
    }
}

/// Builds the constraints for `tools` under `choice`, with an optional response format.
/// `after_calls` says whether the conversation already holds tool calls: a plain-text answer
/// then may not start with `<` either, so the model cannot write another call block as text.
pub(crate) fn plan(
    tools: &[ToolSpec],
    choice: &Choice,
    response_schema: Option<&Value>,
    parallel_calls: bool,
    after_calls: bool,
) -> Result<Plan, GenerateError> {
    let mut seen = std::collections::HashSet::new();
    for tool in tools {
        if tool.name.is_empty() {
            return Err(GenerateError::InvalidRequest(
                "a tool has an empty name".into(),
            ));
        }
        if !seen.insert(tool.name.as_str()) {
            return Err(GenerateError::InvalidRequest(format!(
                "duplicate tool name {:?}",
                tool.name
            )));
        }
    }
    // The tools a call may be forced onto: the auxiliary ones only when there are no others.
    let own: Vec<ToolSpec> = tools.iter().filter(|t| !t.auxiliary).cloned().collect();
    let mut reply = None;
    let (tools, answer): (Vec<ToolSpec>, Answer) = match choice {
        Choice::None => (Vec::new(), answer_kind(response_schema)),
        Choice::Auto => (tools.to_vec(), answer_kind(response_schema)),
        Choice::Required => {
            if tools.is_empty() {
                return Err(GenerateError::InvalidRequest(
                    "a tool call is required but no tools were given".into(),
                ));
            }
            let forced = if own.is_empty() { tools.to_vec() } else { own };
            (forced, Answer::None)
        }
        Choice::Tool(name) => {
            let Some(tool) = tools.iter().find(|t| &t.name == name) else {
                return Err(GenerateError::InvalidRequest(format!(
                    "tool choice names {name:?}, which is not among the tools"
                )));
            };
            (vec![tool.clone()], Answer::None)
        }
        Choice::CallOrReply => {
            if own.is_empty() {
                // Nothing to call but the agent's own tools: a plain answer.
                (Vec::new(), answer_kind(response_schema))
            } else {
                // With every candidate name taken by a tool, the call is simply required.
                if let Some(name) = REPLY_NAMES
                    .into_iter()
                    .find(|name| tools.iter().all(|t| t.name != *name))
                {
                    reply = Some(Box::new(Reply {
                        name,
                        plan: plan(&[], &Choice::None, response_schema, false, true)?,
                    }));
                }
                (own, Answer::None)
            }
        }
    };
    if tools.is_empty() && answer == Answer::Text {
        // Only the first character is constrained (the engine drops the grammar once free
        // text has started), so this costs one grammar check.
        let gbnf = after_calls.then(|| format!("root ::= kestrel-text\n{TEXT_RULE}\n"));
        return Ok(Plan {
            tools,
            answer,
            gbnf,
            reply: None,
        });
    }

    let mut wrapper = String::from(r#"{"type":"object","properties":{"#);
    let mut first = true;
    if !tools.is_empty() {
        wrapper.push_str(&format!(r#""{CALLS_KEY}":{{"anyOf":["#));
        for (i, tool) in tools.iter().enumerate() {
            let label = format!("{}#", tool.name);
            let base = format!("#/properties/{CALLS_KEY}/anyOf/{i}/properties/arguments");
            let schema = prepare(&tool.parameters, &base, &label)?;
            if i > 0 {
                wrapper.push(',');
            }
            // Written by hand so that `name` comes before `arguments` (serde_json's map may
            // sort keys, and the grammar follows the order of `properties`).
            wrapper.push_str(&format!(
                r#"{{"type":"object","properties":{{"name":{{"const":{}}},"arguments":{}}},"required":["name","arguments"],"additionalProperties":false}}"#,
                json_string(&tool.name),
                schema
            ));
        }
        wrapper.push_str("]}");
        first = false;
    }
    if answer == Answer::Json {
        let schema = response_schema.cloned().unwrap_or(Value::Bool(true));
        let schema = prepare(&schema, &format!("#/properties/{ANSWER_KEY}"), "#")?;
        if !first {
            wrapper.push(',');
        }
        wrapper.push_str(&format!(r#""{ANSWER_KEY}":{schema}"#));
    }
    wrapper.push_str("}}");

    let converted = schema_to_gbnf(&wrapper, "the tool and response schemas")?;
    let mut rules: Vec<String> = converted
        .lines()
        .filter(|line| !line.starts_with("root ::="))
        .map(str::to_string)
        .collect();
    let calls_rule = if tools.is_empty() {
        None
    } else {
        Some(value_rule(&converted, CALLS_KEY)?)
    };
    let answer_rule = match answer {
        Answer::Json => Some(value_rule(&converted, ANSWER_KEY)?),
        Answer::Text => Some("kestrel-text".to_string()),
        Answer::None => None,
    };
    // Bare calls (no `<tool_call>` around them) are accepted unless the answer is JSON, which
    // may start with `[` or `{` too: the first character must tell the branches apart.
    let bare_calls = answer != Answer::Json;
    if let Some(call) = &calls_rule {
        let more = if parallel_calls {
            format!(
                r#" (kestrel-ws "," kestrel-ws {call}){{0,{}}}"#,
                MAX_PARALLEL_CALLS - 1
            )
        } else {
            String::new()
        };
        rules.push(format!(
            r#"kestrel-call-list ::= "[" kestrel-ws {call}{more} kestrel-ws "]""#
        ));
        // Inside the tags: the list this crate's prompt asks for, or one call object (the
        // form Qwen's chat template teaches, one block per call).
        let tagged = format!(
            r#""{CALLS_OPEN}" kestrel-ws (kestrel-call-list | {call}) kestrel-ws "{CALLS_CLOSE}""#
        );
        // A fenced block: Qwen2.5-Coder-1.5B wrote every call of the decision set this way.
        let fenced = format!(
            r#""{FENCE_OPEN}" kestrel-ws (kestrel-call-list | {call}) kestrel-ws "{FENCE_CLOSE}""#
        );
        rules.push(if bare_calls {
            format!(r#"kestrel-tool-calls ::= {tagged} | {fenced} | kestrel-call-list | {call}"#)
        } else {
            // A JSON answer never starts with a backtick, so the fence stays.
            format!(r#"kestrel-tool-calls ::= {tagged} | {fenced}"#)
        });
        rules.push(format!(r#"kestrel-ws ::= [ \n]{{0,{MAX_CALL_BLANKS}}}"#));
    }
    if answer == Answer::Text {
        // (Text without calls returned above.)
        rules.push(TEXT_BESIDE_CALLS_RULES.to_string());
    }
    let root = match (&calls_rule, &answer_rule) {
        (Some(_), Some(answer)) => format!("root ::= kestrel-tool-calls | {answer}"),
        (Some(_), None) => "root ::= kestrel-tool-calls".to_string(),
        (None, Some(answer)) => format!("root ::= {answer}"),
        (None, None) => {
            return Err(GenerateError::InvalidRequest(
                "nothing for the model to produce".into(),
            ));
        }
    };
    rules.insert(0, root);
    let mut gbnf = rules.join("\n");
    gbnf.push('\n');
    Ok(Plan {
        tools,
        answer,
        gbnf: Some(gbnf),
        reply,
    })
}

/// The direct reply of call-then-answer's first step, offered to the model as one more tool
/// (shown first in the list, with no arguments). Its name competes with the tools' names in
/// [`crate::engine`]'s forced choice; it is never written out: when it wins, the model
/// answers in text from the end of the prompt.
///
/// Measured on SmolLM2-135M-Instruct (BENCHMARKS.md, "The forced first call"): shown first
/// beat shown last or not shown, and the choice needs the contextual calibration of
/// [`CALIBRATION_TEXT`]; without it the reply wins for tool prompts too.
pub(crate) const REPLY_NAMES: [&str; 3] = ["answer", "reply", "answer_directly"];

/// The reply option's description in the tool list.
pub(crate) const REPLY_DESCRIPTION: &str = "Reply to the user directly, without a tool: for small talk and questions no other tool answers.";

/// The sentence that ends the tool instructions when the reply option is offered (`{name}` is
/// its name).
pub(crate) const REPLY_RULE: &str = "If no other tool fits, call {name}.";

/// The content-free user message a forced choice with a reply option is calibrated against:
/// each name's likelihood for it is subtracted from its likelihood for the real prompt, so
/// that a name the model favours whatever the prompt (a small model's bias) does not win by
/// default. "N/A" did better than an empty message.
pub(crate) const CALIBRATION_TEXT: &str = "N/A";

/// The reply option of a plan: its name (one no tool has) and the plan of the reply itself.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The name the option is shown and scored under.
    pub name: &'static str,
    /// A plain answer that may not open a call block (or the response format's JSON).
    pub plan: Plan,
}

fn answer_kind(response_schema: Option<&Value>) -> Answer {
    if response_schema.is_some() {
        Answer::Json
    } else {
        Answer::Text
    }
}

/// Converts a JSON schema (as text) to GBNF with llama.cpp, turning its exceptions into errors.
fn schema_to_gbnf(schema: &str, what: &str) -> Result<String, GenerateError> {
    llama_cpp_2::json_schema_to_grammar(schema).map_err(|e| GenerateError::InvalidSchema {
        path: what.to_string(),
        message: format!("llama.cpp's schema converter failed ({e})"),
    })
}

/// The rule that the converter generated for the value of `key` in the wrapper object, read
/// from its key-value rule (`<key>-kv ::= "\"<key>\"" space ":" space <rule>`). The value rule
/// is not always named after the key: a plain `{"type": "string"}` reuses the `string` rule.
fn value_rule(gbnf: &str, key: &str) -> Result<String, GenerateError> {
    let prefix = format!("{key}-kv ::= ");
    gbnf.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|body| body.split_whitespace().last())
        .map(str::to_string)
        .ok_or_else(|| {
            GenerateError::Grammar(format!(
                "llama.cpp's schema converter produced no rule for {key}"
            ))
        })
}

fn json_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec::new(name, "", parameters)
    }

    fn feature(result: Result<Plan, GenerateError>) -> String {
        match result {
            Err(GenerateError::UnsupportedSchema { feature, .. }) => feature,
            other => format!("unexpected: {other:?}"),
        }
    }

    #[test]
    fn tools_and_text_grammar() {
        let tools = [
            tool(
                "get_weather",
                json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
            ),
            tool(
                "add",
                json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}),
            ),
        ];
        let plan = plan(&tools, &Choice::Auto, None, false, false).unwrap_or_else(|e| {
            unreachable!("{e}");
        });
        let gbnf = plan.gbnf.unwrap_or_default();
        assert!(
            gbnf.starts_with("root ::= kestrel-tool-calls | kestrel-text\n"),
            "{gbnf}"
        );
        assert!(gbnf.contains("\\\"get_weather\\\""), "{gbnf}");
        assert!(gbnf.contains(TEXT_BESIDE_CALLS_RULES), "{gbnf}");
        assert!(gbnf.contains("| kestrel-call-list |"), "bare calls: {gbnf}");
        assert_eq!(plan.answer, Answer::Text);
        // Beside a JSON answer, only the tagged block.
        let schema = json!({"type": "object"});
        let plan = super::plan(&tools, &Choice::Auto, Some(&schema), false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let gbnf = plan.gbnf.unwrap_or_default();
        let calls = gbnf
            .lines()
            .find(|l| l.starts_with("kestrel-tool-calls ::="))
            .unwrap_or_default();
        assert!(!calls.contains("| kestrel-call-list"), "{calls}");
    }

    #[test]
    fn fenced_calls_beside_text_and_json_answers() {
        let tools = [tool("add", json!({"type":"object"}))];
        let calls_rule = |schema: Option<&Value>| {
            let p = plan(&tools, &Choice::Auto, schema, false, false)
                .unwrap_or_else(|e| unreachable!("{e}"));
            let gbnf = p.gbnf.unwrap_or_default();
            gbnf.lines()
                .find(|l| l.starts_with("kestrel-tool-calls ::="))
                .map(str::to_string)
                .unwrap_or_default()
        };
        for rule in [
            calls_rule(None),
            calls_rule(Some(&json!({"type": "object"}))),
        ] {
            assert!(
                rule.contains(r#""```json" kestrel-ws (kestrel-call-list | "#),
                "{rule}"
            );
        }
    }

    /// Whether the grammar accepts `text` as (the start of) the output, checked token by token
    /// with llama.cpp's grammar engine and the test model's vocabulary.
    fn grammar_accepts(model: &llama_cpp_2::model::LlamaModel, gbnf: &str, text: &str) -> bool {
        use llama_cpp_2::sampling::LlamaSampler;
        use llama_cpp_2::token::data::LlamaTokenData;
        use llama_cpp_2::token::data_array::LlamaTokenDataArray;
        let Ok(mut grammar) = LlamaSampler::grammar(model, gbnf, "root") else {
            unreachable!("the grammar does not build:\n{gbnf}");
        };
        for token in model.vocab().tokenize(text.as_bytes(), false, false) {
            let mut one =
                LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
            grammar.apply(&mut one);
            if one
                .data
                .first()
                .is_none_or(|d| d.logit() == f32::NEG_INFINITY)
            {
                return false;
            }
            if grammar.try_accept(token).is_err() {
                return false;
            }
        }
        true
    }

    #[test]
    fn the_first_characters_decide_under_llama_cpp() {
        let Some(path) = std::env::var_os("KESTREL_TEST_GGUF").filter(|p| !p.is_empty()) else {
            eprintln!(
                "skipped: KESTREL_TEST_GGUF is not set (a GGUF model to take a vocabulary from)"
            );
            return;
        };
        let backend = crate::engine::backend().unwrap_or_else(|e| unreachable!("{e}"));
        let model = llama_cpp_2::model::LlamaModel::load_from_file(
            backend,
            &path,
            &llama_cpp_2::model::params::LlamaModelParams::default(),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        let tools = [tool(
            "add",
            json!({"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}),
        )];
        let p =
            plan(&tools, &Choice::Auto, None, false, false).unwrap_or_else(|e| unreachable!("{e}"));
        let gbnf = p.gbnf.unwrap_or_default();
        let call = r#"{"name": "add", "arguments": {"a": 1}}"#;
        for (text, accepted) in [
            // Every call form.
            (format!("<tool_call>[{call}]</tool_call>"), true),
            (format!("<tool_call>\n{call}\n</tool_call>"), true),
            (format!("```json\n{call}\n```"), true),
            (format!("```json\n[{call}]\n```"), true),
            (format!("```json{call}```"), true),
            (format!("[{call}]"), true),
            (call.to_string(), true),
            // A fenced call must name a tool and follow its schema.
            ("```json\n".to_string() + r#"{"name": "nope""#, false),
            ("```json\n".to_string() + r#"{"x": 1}"#, false),
            (
                "```json\n".to_string() + r#"{"name": "add", "arguments": {"a": "one"}}"#,
                false,
            ),
            // Text may start with a backtick: code blocks, or a fence around something else.
            ("```python\nprint(1)\n```".to_string(), true),
            ("`x` is a variable".to_string(), true),
            ("``` \nplain\n```".to_string(), true),
            ("```json\n\"hi\"\n```".to_string(), true),
            ("```json\n\n\n{\"x\": 1}".to_string(), true),
            // ... but not as a bare call's start.
            ("{\"x\": 1}".to_string(), false),
            ("Hello {there}".to_string(), true),
        ] {
            assert_eq!(grammar_accepts(&model, &gbnf, &text), accepted, "{text:?}");
        }
    }

    #[test]
    fn plain_text_needs_no_grammar() {
        let p =
            plan(&[], &Choice::Auto, None, false, false).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(p.gbnf.is_none());
        let tools = [tool("t", json!({"type":"object"}))];
        let p =
            plan(&tools, &Choice::None, None, false, false).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(p.gbnf.is_none() && !p.calls());
    }

    #[test]
    fn a_plain_answer_after_calls_may_not_open_a_call_block() {
        let tools = [tool("t", json!({"type":"object"}))];
        for (tools, choice) in [(&tools[..], Choice::None), (&[][..], Choice::Auto)] {
            let p = plan(tools, &choice, None, false, true).unwrap_or_else(|e| unreachable!("{e}"));
            assert!(!p.calls());
            assert_eq!(
                p.gbnf.as_deref(),
                Some("root ::= kestrel-text\nkestrel-text ::= [^<] [^\\x00]*\n")
            );
        }
        // With calls allowed it may not open a bare call either.
        let p =
            plan(&tools, &Choice::Auto, None, false, true).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(p.gbnf.unwrap_or_default().contains(TEXT_BESIDE_CALLS_RULES));
    }

    #[test]
    fn json_answer_of_a_primitive_type() {
        let schema = json!({"type": "string"});
        let p = plan(&[], &Choice::Auto, Some(&schema), false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let gbnf = p.gbnf.unwrap_or_default();
        assert!(gbnf.starts_with("root ::= string\n"), "{gbnf}");
    }

    #[test]
    fn forced_and_invalid_choices() {
        let tools = [tool("a", json!({})), tool("b", json!({}))];
        let p = plan(&tools, &Choice::Tool("b".into()), None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(p.tools.len(), 1);
        assert_eq!(p.answer, Answer::None);
        assert!(matches!(
            plan(&tools, &Choice::Tool("c".into()), None, false, false),
            Err(GenerateError::InvalidRequest(_))
        ));
        assert!(matches!(
            plan(&[], &Choice::Required, None, false, false),
            Err(GenerateError::InvalidRequest(_))
        ));
        let dup = [tool("a", json!({})), tool("a", json!({}))];
        assert!(matches!(
            plan(&dup, &Choice::Auto, None, false, false),
            Err(GenerateError::InvalidRequest(_))
        ));
    }

    #[test]
    fn unsupported_features_are_named() {
        let with = |schema: Value| plan(&[tool("t", schema)], &Choice::Auto, None, false, false);
        assert_eq!(
            feature(with(
                json!({"type":"object","properties":{"x":{"not":{"type":"string"}}}})
            )),
            "not"
        );
        assert_eq!(
            feature(with(
                json!({"type":"object","properties":{"x":{"type":"number","minimum":0}}})
            )),
            "minimum"
        );
        assert_eq!(
            feature(with(
                json!({"type":"object","properties":{"x":{"type":"string","pattern":"abc"}}})
            )),
            "pattern"
        );
        assert_eq!(
            feature(with(
                json!({"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}})
            )),
            "uniqueItems"
        );
        assert_eq!(
            feature(with(json!({"type":"object","required":["x"]}))),
            "required"
        );
        assert_eq!(
            feature(with(json!({"$ref":"https://example.com/s.json"}))),
            "$ref"
        );
        // Integer bounds and anchored patterns are fine.
        assert!(with(json!({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5},"s":{"type":"string","pattern":"^[a-z]+$"}}})).is_ok());
        // Unresolvable and malformed schemas are invalid, not unsupported.
        assert!(matches!(
            with(json!({"$ref":"#/$defs/nope"})),
            Err(GenerateError::InvalidSchema { .. })
        ));
        assert!(matches!(
            with(json!(3)),
            Err(GenerateError::InvalidSchema { .. })
        ));
    }

    #[test]
    fn auxiliary_tools_are_never_forced() {
        let tools = [
            tool("get_weather", json!({"type":"object"})),
            tool("update_working_memory", json!({"type":"object"})).auxiliary(),
        ];
        let names = |p: &Plan| p.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        // Required: among the other tools.
        let p = plan(&tools, &Choice::Required, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(names(&p), ["get_weather"]);
        assert!(p.reply.is_none());
        // ... unless there are no others.
        let p = plan(&tools[1..], &Choice::Required, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(names(&p), ["update_working_memory"]);
        // Call-then-answer's first step: the other tools, or a direct reply that may not
        // open a call block.
        let p = plan(&tools, &Choice::CallOrReply, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(names(&p), ["get_weather"]);
        assert_eq!(p.answer, Answer::None);
        let reply = p.reply.unwrap_or_else(|| unreachable!("no reply option"));
        assert_eq!(reply.name, "answer");
        let reply = reply.plan;
        assert_eq!(reply.answer, Answer::Text);
        assert!(!reply.calls());
        assert_eq!(
            reply.gbnf.as_deref(),
            Some("root ::= kestrel-text\nkestrel-text ::= [^<] [^\\x00]*\n")
        );
        // With only auxiliary tools there is nothing to call: a plain answer.
        let p = plan(&tools[1..], &Choice::CallOrReply, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(!p.calls() && p.reply.is_none() && p.answer == Answer::Text);
        // A direct reply with a response format is JSON.
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let p = plan(&tools, &Choice::CallOrReply, Some(&schema), false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(p.reply.map(|r| r.plan.answer), Some(Answer::Json));
        // The option's name is one no tool has.
        let taken = [
            tool("answer", json!({"type":"object"})),
            tool("reply", json!({"type":"object"})),
        ];
        let p = plan(&taken, &Choice::CallOrReply, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(p.reply.map(|r| r.name), Some("answer_directly"));
        let all = REPLY_NAMES.map(|name| tool(name, json!({"type":"object"})));
        let p = plan(&all, &Choice::CallOrReply, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(p.reply.is_none() && p.tools.len() == 3 && p.answer == Answer::None);
        // The model deciding, or a tool named, may use them.
        let p =
            plan(&tools, &Choice::Auto, None, false, false).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(names(&p), ["get_weather", "update_working_memory"]);
        let p = plan(
            &tools,
            &Choice::Tool("update_working_memory".into()),
            None,
            false,
            false,
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(names(&p), ["update_working_memory"]);
    }

    #[test]
    fn refs_are_rebased() {
        let schema = json!({"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"required":["p"],"$defs":{"P":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}});
        let p = plan(&[tool("t", schema)], &Choice::Required, None, false, false)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(p.gbnf.is_some());
    }
}
