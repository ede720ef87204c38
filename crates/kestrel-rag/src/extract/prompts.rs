//! What the extractors send: Mastra's prompt templates and agent instructions, word for word,
//! its `{placeholder}` filling, and the context a chunk is shown as.

use serde_json::{Map, Value};

/// Mastra's `defaultSummaryPrompt` (`{context}`).
pub const SUMMARY_TEMPLATE: &str = "Write a summary of the following. Try to use only the information provided. Try to include as many key details as possible.\n\n\n{context}\n\n\nSUMMARY:\"\"\"\n";

/// Mastra's `defaultKeywordExtractPrompt` (`{maxKeywords}`, `{context}`).
pub const KEYWORDS_TEMPLATE: &str = "\nSome text is provided below. Given the text, extract up to {maxKeywords} keywords from the text. Avoid stopwords.\n---------------------\n{context}\n---------------------\nProvide keywords in the following comma-separated format: 'KEYWORDS: <keywords>'\n";

/// Mastra's `defaultQuestionExtractPrompt` (`{numQuestions}`, `{context}`), parentheses and
/// quotes included: Mastra sends it so.
pub const QUESTIONS_TEMPLATE: &str = "(\n  \"Given the contextual information below, generate {numQuestions} questions this context can provide specific answers to which are unlikely to be found elsewhere. Higher-level summaries of surrounding context may be provided as well. \"\n  \"Try using these summaries to generate better questions that this context can answer.\"\n  \"---------------------\"\n  \"{context}\"\n  \"---------------------\"\n  \"Provide questions in the following format: 'QUESTIONS: <questions>'\"\n)";

/// Mastra's `defaultTitleExtractorPromptTemplate`: one title candidate per chunk (`{context}`).
pub const TITLE_NODE_TEMPLATE: &str = "{context}\nGive a title that summarizes all of the unique entities, titles or themes found in the context. \nTitle: ";

/// Mastra's `defaultTitleCombinePromptTemplate`: the document's title from the candidates
/// (`{context}`, the candidates joined with `", "`).
pub const TITLE_COMBINE_TEMPLATE: &str = "{context} \nBased on the above candidate titles and contents, what is the comprehensive title for this document? \nTitle: ";

/// The instructions of Mastra's `titles-candidates-extractor` agent.
pub const TITLE_NODE_INSTRUCTIONS: &str = "You are a titles candidates extractor. You are given a list of nodes and you need to extract the titles candidates from the nodes.";
/// The instructions of Mastra's `title-extractor` agent.
pub const TITLE_COMBINE_INSTRUCTIONS: &str = "You are a title extractor. You are given a list of nodes and you need to extract the title from the nodes.";
/// The instructions of Mastra's `summary-extractor` agent.
pub const SUMMARY_INSTRUCTIONS: &str = "You are a summary extractor. You are given a node and you need to extract the summary from the node.";
/// The instructions of Mastra's `question-extractor` agent.
pub const QUESTIONS_INSTRUCTIONS: &str = "You are a question extractor. You are given a node and you need to extract the questions from the node.";
/// The instructions of Mastra's `keyword-extractor` agent.
pub const KEYWORDS_INSTRUCTIONS: &str = "You are a keyword extractor. You are given a node and you need to extract the keywords from the node.";
/// The instructions of Mastra's `schema-extractor` agent when none are given.
pub const SCHEMA_INSTRUCTIONS: &str = "Extract structured data from the provided text.";

/// Appended to the title agents' instructions (Kestrel's: Mastra's agents answer in free
/// text). The JSON is also enforced by the schema; this says what goes in it, for a model that
/// sees only the grammar.
pub const TITLE_JSON: &str = "Answer with a JSON object: {\"title\": the title alone}.";
/// Appended to the summary agent's instructions.
pub const SUMMARY_JSON: &str = "Answer with a JSON object: {\"summary\": the summary}.";
/// Appended to the questions agent's instructions.
pub const QUESTIONS_JSON: &str = "Answer with a JSON object: {\"questions\": [the questions, one per item, without numbers or a label]}.";
/// Appended to the keyword agent's instructions.
pub const KEYWORDS_JSON: &str = "Answer with a JSON object: {\"keywords\": [the keywords, one keyword or key phrase per item, without a label]}.";

/// Mastra's instructions for an agent, then what its JSON answer holds.
pub fn instructions(mastra: &str, json: &str) -> String {
    format!("{mastra} {json}")
}

/// Fills a template as Mastra's `format` does: every `{word}` (letters, digits, `_`) becomes
/// its value, or nothing when there is none; other braces stay.
pub fn format(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with('}') {
            let name = &after[..name_len];
            let value = values.iter().find(|(key, _)| *key == name);
            out.push_str(value.map_or("", |(_, value)| value));
            rest = &after[name_len + 1..];
        } else {
            out.push('{');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `template` has the placeholder `name` (`{name}`).
pub fn has_placeholder(template: &str, name: &str) -> bool {
    template.contains(&format!("{{{name}}}"))
}

/// A chunk as Mastra's extractors show it to the model (its node's `getContent()`): the
/// metadata, one `key: value` line per key in key order, a blank line, then the text; trimmed.
/// So an extractor sees what the extractors before it wrote (the questions extractor sees the
/// summaries, as its prompt says). Strings are written as they are, other values as JSON
/// (where JavaScript would write `[object Object]`).
pub fn context(text: &str, metadata: &Map<String, Value>) -> String {
    let mut entries: Vec<(&String, &Value)> = metadata.iter().collect();
    entries.sort_by_key(|(key, _)| *key);
    let lines: Vec<String> = entries
        .into_iter()
        .map(|(key, value)| match value {
            Value::String(text) => format!("{key}: {text}"),
            json => format!("{key}: {json}"),
        })
        .collect();
    format!("{}\n\n{text}", lines.join("\n").trim())
        .trim()
        .to_owned()
}

/// One line: line breaks (`\r\n`, `\n`, `\r`) become spaces, as Mastra keeps its summaries and
/// questions on one line; trimmed.
pub fn one_line(text: &str) -> String {
    text.replace("\r\n", " ")
        .replace(['\n', '\r'], " ")
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;

    use super::*;

    #[test]
    fn placeholders_fill_as_mastra_fills_them() {
        assert_eq!(
            format("{a} and {b}, {missing}!", &[("a", "1"), ("b", "2")]),
            "1 and 2, !"
        );
        assert_eq!(
            format(r#"{"json": {x}} { } {x-y} {"#, &[("x", "X")]),
            r#"{"json": X} { } {x-y} {"#
        );
        assert_eq!(
            format("{context}", &[("context", "{context}")]),
            "{context}"
        );
    }

    #[test]
    fn a_chunk_is_shown_with_its_metadata_in_key_order() {
        let metadata = json!({"source": "a.md", "page": 2, "tags": ["x"]});
        let metadata = metadata.as_object().unwrap();
        assert_eq!(
            context("  The text.  ", metadata),
            "page: 2\nsource: a.md\ntags: [\"x\"]\n\n  The text.",
            "only the whole is trimmed, as in Mastra"
        );
        assert_eq!(context(" text ", &Map::new()), "text");
        assert_eq!(context("  ", &Map::new()), "");
    }

    #[test]
    fn one_line_joins_lines_with_spaces() {
        assert_eq!(one_line(" a\r\nb\nc\rd "), "a b c d");
    }
}
