//! `skill_search`: BM25 ranking over passages of the skills' text (instructions and text
//! references), so the model can find which skill, and which lines of it, cover a topic.

use bm25::{Language, SearchEngineBuilder};
use serde::Serialize;

use super::{LineRange, Skill, SkillError, SkillFileContent};

/// Lines per passage: small enough to point at a section, large enough to rank.
const PASSAGE_LINES: usize = 12;
/// Reference files larger than this are not searched.
const MAX_SEARCHED_BYTES: u64 = 256 * 1024;
/// The longest preview of a hit, in characters.
const PREVIEW_CHARS: usize = 200;

/// One passage that matched a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillSearchHit {
    /// The skill.
    pub skill_name: String,
    /// The file, relative to the skill (`SKILL.md` for the instructions).
    pub path: String,
    /// The first line of the passage (1-based, in the instructions or the file).
    pub start_line: usize,
    /// Its last line.
    pub end_line: usize,
    /// The BM25 score (higher is better).
    pub score: f32,
    /// The passage's start, on one line.
    pub preview: String,
}

struct Passage {
    skill: String,
    path: String,
    start: usize,
    end: usize,
    text: String,
}

/// Ranks the passages of `skills` against `query`; the best `top_k` first.
pub(crate) async fn search(
    skills: &[&Skill],
    query: &str,
    top_k: usize,
) -> Result<Vec<SkillSearchHit>, SkillError> {
    if !query.chars().any(char::is_alphanumeric) {
        return Err(SkillError::EmptyQuery);
    }
    let mut passages = Vec::new();
    for skill in skills {
        // The name and description lead the first passage: a query naming the skill's topic
        // finds it even when its body words it otherwise.
        let heading = format!("{} {}", skill.name().replace('-', " "), skill.description());
        split(
            skill.name(),
            "SKILL.md",
            skill.instructions(),
            &heading,
            &mut passages,
        );
        for path in skill.files().await?.references {
            if !is_text_like(&path) {
                continue;
            }
            if let Ok(SkillFileContent::Text { text, .. }) =
                skill.read(&path, LineRange::default()).await
                && text.len() as u64 <= MAX_SEARCHED_BYTES
            {
                split(skill.name(), &path, &text, "", &mut passages);
            }
        }
    }
    if passages.is_empty() {
        return Ok(Vec::new());
    }
    let engine = SearchEngineBuilder::<usize>::with_documents(
        Language::English,
        passages
            .iter()
            .enumerate()
            .map(|(i, p)| bm25::Document::new(i, p.text.clone())),
    )
    .build();
    let hits = engine
        .search(query, top_k)
        .into_iter()
        .filter(|hit| hit.score > 0.0)
        .filter_map(|hit| {
            let passage = passages.get(hit.document.id)?;
            Some(SkillSearchHit {
                skill_name: passage.skill.clone(),
                path: passage.path.clone(),
                start_line: passage.start,
                end_line: passage.end,
                score: hit.score,
                preview: preview(&passage.text),
            })
        })
        .collect();
    Ok(hits)
}

/// Reference files worth searching: text formats by their extension.
fn is_text_like(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [
        ".md",
        ".txt",
        ".markdown",
        ".rst",
        ".json",
        ".yaml",
        ".yml",
        ".csv",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext))
}

fn split(skill: &str, path: &str, text: &str, heading: &str, out: &mut Vec<Passage>) {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() && !heading.is_empty() {
        out.push(Passage {
            skill: skill.to_owned(),
            path: path.to_owned(),
            start: 1,
            end: 1,
            text: heading.to_owned(),
        });
    }
    for (index, chunk) in lines.chunks(PASSAGE_LINES).enumerate() {
        let start = index * PASSAGE_LINES + 1;
        let mut text = chunk.join("\n");
        if index == 0 && !heading.is_empty() {
            text = format!("{heading}\n{text}");
        }
        out.push(Passage {
            skill: skill.to_owned(),
            path: path.to_owned(),
            start,
            end: start + chunk.len() - 1,
            text,
        });
    }
}

fn preview(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= PREVIEW_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(PREVIEW_CHARS).collect();
    format!("{cut}…")
}
