//! `skill_search`: BM25 ranking over passages of the skills' text (instructions and text
//! references), so the model can find which skill, and which lines of it, cover a topic.
//!
//! A skill's passages are read and tokenised once, on its first search, and kept with the skill
//! ([`IndexCache`]) under a key of its searched references' paths, sizes and modification
//! times. Later searches list the skill's folder and look at those files' metadata only; they
//! read and tokenise again when a file was added, removed or changed. A search scores the
//! chosen skills' passages together, so term weights (IDF, average passage length) are those of
//! the chosen skills' text, as one index over it would give. It all runs on a blocking thread.
//!
//! Bounds: a reference over [`MAX_SEARCHED_BYTES`] is left out by its size, unread; a skill's
//! references give at most [`MAX_INDEXED_BYTES`] of text to its index, in path order.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use bm25::{DefaultTokenizer, Language, Tokenizer};
use serde::Serialize;

use super::files::{self, FileStamp};
use super::{LineRange, Origin, Skill, SkillError, SkillFileContent};

/// The most skill names one search takes (`skillNames`, repeats included).
pub const MAX_SEARCH_SKILLS: usize = 64;
/// The longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 1_000;

/// Lines per passage: small enough to point at a section, large enough to rank.
const PASSAGE_LINES: usize = 12;
/// Reference files larger than this are not searched (nor read).
const MAX_SEARCHED_BYTES: u64 = 256 * 1024;
/// The most text a skill's references give its index.
const MAX_INDEXED_BYTES: u64 = 8 * 1024 * 1024;
/// The longest preview of a hit, in characters.
const PREVIEW_CHARS: usize = 200;
/// BM25's term frequency saturation and length normalisation (the `bm25` crate's defaults).
const K1: f32 = 1.2;
const B: f32 = 0.75;
/// The average passage length assumed when the passages have no terms at all.
const FALLBACK_AVGDL: f32 = 256.0;

/// English words, lowercased, without stop words, stemmed: for passages and queries alike.
static TOKENIZER: LazyLock<DefaultTokenizer> =
    LazyLock::new(|| DefaultTokenizer::new(Language::English));

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

/// A skill's index, built on its first search and rebuilt when its files change: one entry
/// per skill, dropped with it.
#[derive(Default)]
pub(crate) struct IndexCache {
    /// Held while a search checks or builds the index: a second search of the skill waits for
    /// the first one's index instead of building its own.
    slot: Mutex<Option<Arc<SkillIndex>>>,
    /// How many times the index was built.
    #[cfg(test)]
    builds: std::sync::atomic::AtomicUsize,
    /// The threads the index was looked up on.
    #[cfg(test)]
    threads: Mutex<Vec<std::thread::ThreadId>>,
}

impl std::fmt::Debug for IndexCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let passages = match self.slot.try_lock() {
            Ok(slot) => slot.as_ref().map(|index| index.passages.len()),
            Err(_) => None,
        };
        f.debug_struct("IndexCache")
            .field("passages", &passages)
            .finish()
    }
}

/// One skill's passages, tokenised.
struct SkillIndex {
    /// The references it was built from, as they were (an inline skill's never change).
    sources: Vec<FileStamp>,
    passages: Vec<Passage>,
    /// For each term, the passages that hold it and how many times: `(passage, count)`.
    postings: HashMap<String, Vec<(usize, u32)>>,
}

struct Passage {
    path: Arc<str>,
    start: usize,
    end: usize,
    /// How many terms it has.
    terms: usize,
    preview: String,
}

/// Ranks the passages of `skills` against `query`; the best `top_k` first.
pub(crate) async fn search(
    skills: Vec<Skill>,
    query: String,
    top_k: usize,
) -> Result<Vec<SkillSearchHit>, SkillError> {
    if !query.chars().any(char::is_alphanumeric) {
        return Err(SkillError::EmptyQuery);
    }
    super::blocking(move || {
        let indexes = skills.iter().map(index_of).collect::<Result<Vec<_>, _>>()?;
        Ok(rank(&skills, &indexes, &query, top_k))
    })
    .await
}

/// The skill's index: the one kept when its references are as they were, else a new one.
fn index_of(skill: &Skill) -> Result<Arc<SkillIndex>, SkillError> {
    let cache = &skill.inner.index;
    let mut slot = cache.slot.lock().unwrap_or_else(PoisonError::into_inner);
    #[cfg(test)]
    cache
        .threads
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(std::thread::current().id());
    let sources = sources_of(skill)?;
    if let Some(index) = slot.as_ref().filter(|index| index.sources == sources) {
        return Ok(Arc::clone(index));
    }
    #[cfg(test)]
    cache
        .builds
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let index = Arc::new(build(skill, sources));
    *slot = Some(Arc::clone(&index));
    Ok(index)
}

/// The stamps of the skill's text references, from a listing and their metadata.
fn sources_of(skill: &Skill) -> Result<Vec<FileStamp>, SkillError> {
    Ok(match &skill.inner.origin {
        Origin::Folder { root, .. } => files::list_folder(root)?
            .references
            .iter()
            .filter(|path| is_text_like(path))
            // A file gone or unreadable since the listing is left out, like a binary one.
            .filter_map(|path| files::stamp_folder_file(skill.name(), root, path).ok())
            .collect(),
        Origin::Inline { files: inline } => files::list_inline(inline)
            .references
            .into_iter()
            .filter(|path| is_text_like(path))
            .filter_map(|path| {
                let size = inline.get(&path)?.len() as u64;
                Some(FileStamp {
                    path,
                    size,
                    modified: None,
                })
            })
            .collect(),
    })
}

/// Reads and tokenises the skill's instructions and the references of `sources` that fit the
/// bounds (by their stamped size: a file too large is not opened).
fn build(skill: &Skill, sources: Vec<FileStamp>) -> SkillIndex {
    let mut index = SkillIndex {
        sources: Vec::new(),
        passages: Vec::new(),
        postings: HashMap::new(),
    };
    // The name and description lead the first passage: a query naming the skill's topic finds
    // it even when its body words it otherwise.
    let heading = format!("{} {}", skill.name().replace('-', " "), skill.description());
    index.add("SKILL.md", skill.instructions(), &heading);
    let mut budget = MAX_INDEXED_BYTES;
    for stamp in &sources {
        let limit = MAX_SEARCHED_BYTES.min(budget);
        if stamp.size > limit {
            continue;
        }
        let content = match &skill.inner.origin {
            Origin::Folder { root, .. } => files::read_folder_file_within(
                skill.name(),
                root,
                &stamp.path,
                LineRange::default(),
                limit,
            ),
            Origin::Inline { files: inline } => files::read_inline_file(
                skill.name(),
                skill.instructions(),
                inline,
                &stamp.path,
                LineRange::default(),
            ),
        };
        if let Ok(SkillFileContent::Text { text, .. }) = content {
            budget = budget.saturating_sub(text.len() as u64);
            index.add(&stamp.path, &text, "");
        }
    }
    index.sources = sources;
    index
}

impl SkillIndex {
    /// Splits a file's text into passages of [`PASSAGE_LINES`] lines and indexes their terms;
    /// a `heading` leads the first one.
    fn add(&mut self, path: &str, text: &str, heading: &str) {
        let path: Arc<str> = Arc::from(path);
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() && !heading.is_empty() {
            self.push(Arc::clone(&path), 1, 1, heading.to_owned());
        }
        for (index, chunk) in lines.chunks(PASSAGE_LINES).enumerate() {
            let start = index * PASSAGE_LINES + 1;
            let mut text = chunk.join("\n");
            if index == 0 && !heading.is_empty() {
                text = format!("{heading}\n{text}");
            }
            self.push(Arc::clone(&path), start, start + chunk.len() - 1, text);
        }
    }

    fn push(&mut self, path: Arc<str>, start: usize, end: usize, text: String) {
        let id = self.passages.len();
        let terms = TOKENIZER.tokenize(&text);
        let mut counts: HashMap<String, u32> = HashMap::new();
        for term in &terms {
            *counts.entry(term.clone()).or_default() += 1;
        }
        for (term, count) in counts {
            self.postings.entry(term).or_default().push((id, count));
        }
        self.passages.push(Passage {
            path,
            start,
            end,
            terms: terms.len(),
            preview: preview(&text),
        });
    }
}

/// BM25 over the passages of all `indexes` together; the best `top_k` with a positive score,
/// ties in skill and passage order.
fn rank(
    skills: &[Skill],
    indexes: &[Arc<SkillIndex>],
    query: &str,
    top_k: usize,
) -> Vec<SkillSearchHit> {
    let count: usize = indexes.iter().map(|index| index.passages.len()).sum();
    if count == 0 {
        return Vec::new();
    }
    let terms: usize = indexes
        .iter()
        .flat_map(|index| index.passages.iter().map(|p| p.terms))
        .sum();
    let avgdl = match terms as f32 / count as f32 {
        avgdl if avgdl > 0.0 => avgdl,
        _ => FALLBACK_AVGDL,
    };
    let mut scores: HashMap<(usize, usize), f32> = HashMap::new();
    // A term the query repeats counts each time, as in the `bm25` crate.
    for term in TOKENIZER.tokenize(query) {
        let postings: Vec<(usize, &Vec<(usize, u32)>)> = indexes
            .iter()
            .enumerate()
            .filter_map(|(skill, index)| Some((skill, index.postings.get(&term)?)))
            .collect();
        let holding: usize = postings.iter().map(|(_, list)| list.len()).sum();
        if holding == 0 {
            continue;
        }
        let idf = (1.0 + (count as f32 - holding as f32 + 0.5) / (holding as f32 + 0.5)).ln();
        for (skill, list) in postings {
            for &(passage, frequency) in list {
                let Some(length) = indexes
                    .get(skill)
                    .and_then(|index| index.passages.get(passage))
                    .map(|p| p.terms as f32)
                else {
                    continue;
                };
                let frequency = frequency as f32;
                let weight =
                    frequency * (K1 + 1.0) / (frequency + K1 * (1.0 - B + B * length / avgdl));
                *scores.entry((skill, passage)).or_default() += idf * weight;
            }
        }
    }
    let mut ranked: Vec<((usize, usize), f32)> = scores
        .into_iter()
        .filter(|(_, score)| *score > 0.0)
        .collect();
    ranked.sort_by(|(a, a_score), (b, b_score)| b_score.total_cmp(a_score).then(a.cmp(b)));
    ranked
        .into_iter()
        .take(top_k)
        .filter_map(|((skill, passage), score)| {
            let name = skills.get(skill)?.name();
            let passage = indexes.get(skill)?.passages.get(passage)?;
            Some(SkillSearchHit {
                skill_name: name.to_owned(),
                path: passage.path.to_string(),
                start_line: passage.start,
                end_line: passage.end,
                score,
                preview: passage.preview.clone(),
            })
        })
        .collect()
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

fn preview(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= PREVIEW_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(PREVIEW_CHARS).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::path::Path;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, SystemTime};

    use bm25::SearchEngineBuilder;

    use super::*;
    use crate::skill::create_skill;
    use crate::skill::files::reads;

    /// A folder skill `guide` under `dir` with the references given (name, content).
    fn folder_skill(dir: &Path, references: &[(&str, &str)]) -> Skill {
        let root = dir.join("guide");
        std::fs::create_dir_all(root.join("references")).unwrap();
        std::fs::write(
            root.join("SKILL.md"),
            "---\nname: guide\ndescription: Guides.\n---\nFollow the guide.\n",
        )
        .unwrap();
        for (name, content) in references {
            std::fs::write(root.join("references").join(name), content).unwrap();
        }
        Skill::from_dir(&root).unwrap()
    }

    fn builds(skill: &Skill) -> usize {
        skill.inner.index.builds.load(Ordering::Relaxed)
    }

    async fn paths_found(skill: &Skill, query: &str) -> Vec<String> {
        search(vec![skill.clone()], query.to_owned(), 20)
            .await
            .unwrap()
            .into_iter()
            .map(|hit| hit.path)
            .collect()
    }

    #[tokio::test]
    async fn the_index_is_built_once_and_rebuilt_when_a_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let skill = folder_skill(dir.path(), &[("a.md", "Pelicans eat fish.\n")]);
        let a = dir.path().join("guide/references/a.md");

        assert_eq!(paths_found(&skill, "pelicans").await, ["references/a.md"]);
        assert_eq!(paths_found(&skill, "fish").await, ["references/a.md"]);
        // A clone shares the index.
        assert_eq!(
            paths_found(&skill.clone(), "fish").await,
            ["references/a.md"]
        );
        assert_eq!(builds(&skill), 1);
        assert_eq!(reads::count(&a), 1);

        // Same size, another modification time: the stamp differs, the index is rebuilt.
        std::fs::write(&a, "Herons eat frogs.\n\n").unwrap();
        let file = std::fs::File::options().write(true).open(&a).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
            .unwrap();
        drop(file);
        assert_eq!(paths_found(&skill, "herons").await, ["references/a.md"]);
        assert!(paths_found(&skill, "pelicans").await.is_empty());
        assert_eq!(builds(&skill), 2);
        assert_eq!(reads::count(&a), 2);

        // A new reference, then one removed.
        let b = dir.path().join("guide/references/b.md");
        std::fs::write(&b, "Storks eat frogs too.\n").unwrap();
        assert_eq!(paths_found(&skill, "storks").await, ["references/b.md"]);
        assert_eq!(builds(&skill), 3);
        std::fs::remove_file(&b).unwrap();
        assert!(paths_found(&skill, "storks").await.is_empty());
        assert_eq!(builds(&skill), 4);
        assert_eq!(reads::count(&a), 4);
    }

    #[tokio::test]
    async fn an_inline_skill_is_indexed_once() {
        let skill = create_skill("birds", "Birds.", "Look up.")
            .reference("owls.md", "Owls hunt at night.")
            .build()
            .unwrap();
        for _ in 0..3 {
            assert_eq!(paths_found(&skill, "owls").await, ["references/owls.md"]);
        }
        assert_eq!(builds(&skill), 1);
    }

    #[tokio::test]
    async fn a_reference_over_the_bound_is_left_out_unread() {
        let dir = tempfile::tempdir().unwrap();
        let big = format!(
            "Albatross.\n{}",
            "x\n".repeat(MAX_SEARCHED_BYTES as usize / 2)
        );
        let skill = folder_skill(
            dir.path(),
            &[("big.md", &big), ("small.md", "Albatross wings.\n")],
        );
        assert!(big.len() as u64 > MAX_SEARCHED_BYTES);
        assert_eq!(
            paths_found(&skill, "albatross").await,
            ["references/small.md"]
        );
        assert_eq!(reads::count(&dir.path().join("guide/references/big.md")), 0);
        assert_eq!(
            reads::count(&dir.path().join("guide/references/small.md")),
            1
        );
    }

    #[tokio::test]
    async fn a_skills_references_are_indexed_up_to_a_budget() {
        // Inline, so the budget is the only bound in play: files of about 200 KiB each.
        let file = format!(
            "Cormorant.\n{}",
            format!("{}\n", "y".repeat(1_000)).repeat(200)
        );
        let mut builder = create_skill("many", "Many files.", "Read them.");
        for i in 0..50 {
            builder = builder.reference(format!("f{i:02}.md"), file.clone());
        }
        let skill = builder.build().unwrap();
        let hits = search(vec![skill], "cormorant".to_owned(), 100)
            .await
            .unwrap();
        let fit = (MAX_INDEXED_BYTES / file.len() as u64) as usize;
        assert!(fit < 50, "{fit}");
        assert_eq!(hits.len(), fit);
        assert_eq!(
            hits.last().unwrap().path,
            format!("references/f{:02}.md", fit - 1)
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_search_runs_off_the_async_thread() {
        let skill = create_skill("birds", "Birds.", "Owls hunt at night.")
            .build()
            .unwrap();
        let hits = search(vec![skill.clone()], "owls".to_owned(), 5)
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
        let threads = skill.inner.index.threads.lock().unwrap().clone();
        // The runtime's only async thread is this one: the index was looked up elsewhere.
        assert_eq!(threads.len(), 1);
        assert_ne!(threads[0], std::thread::current().id());
    }

    #[tokio::test]
    async fn scores_are_those_of_one_bm25_index_over_the_chosen_skills() {
        let owls = create_skill("owls", "Night birds.", "Owls hunt mice at night.")
            .reference(
                "eyes.md",
                "Owls see well in the dark; their eyes do not move.",
            )
            .build()
            .unwrap();
        let gulls = create_skill("gulls", "Sea birds.", "Gulls steal chips at the beach.")
            .reference("food.md", "Gulls eat fish, chips and mice, when hungry.")
            .build()
            .unwrap();
        // The passages as the index cuts them: one each, headed by name and description.
        let texts = [
            "owls Night birds.\nOwls hunt mice at night.",
            "Owls see well in the dark; their eyes do not move.",
            "gulls Sea birds.\nGulls steal chips at the beach.",
            "Gulls eat fish, chips and mice, when hungry.",
        ];
        let engine = SearchEngineBuilder::<usize>::with_documents(
            Language::English,
            texts
                .iter()
                .enumerate()
                .map(|(i, text)| bm25::Document::new(i, *text)),
        )
        .build();
        for query in ["owls at night", "mice", "chips chips fish", "dark eyes"] {
            let hits = search(vec![owls.clone(), gulls.clone()], query.to_owned(), 20)
                .await
                .unwrap();
            let expected = engine.search(query, 20);
            assert_eq!(hits.len(), expected.len(), "{query}");
            for (hit, want) in hits.iter().zip(&expected) {
                assert!(
                    (hit.score - want.score).abs() < 1e-4,
                    "{query}: {hit:?} {want:?}"
                );
                assert_eq!(hit.preview, texts[want.document.id].replace('\n', " "));
            }
        }
    }
}
