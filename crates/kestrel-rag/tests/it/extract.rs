//! The metadata extractors, against scripted models: Mastra's keys and values, Mastra's prompts
//! with the chunk in them, the summaries' and titles' wiring across chunks, the schema
//! extractor's object, the concurrency bound, typed errors and option errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::model::{
    FinishReason, LanguageModel, ModelError, ModelEvent, ModelRequest, ModelStream, ResponseFormat,
    ScriptedModel, ScriptedResponse, Usage,
};
use kestrel_rag::extract::prompts;
use kestrel_rag::{
    Chunk, ChunkError, ChunkOptions, Document, ExtractError, ExtractOptions, Extractor,
    KeywordsOptions, QuestionsOptions, SchemaOptions, SummaryKind, SummaryOptions, TitleOptions,
    extract,
};
use serde_json::{Map, Value, json};

fn chunk(text: &str) -> Chunk {
    Chunk {
        text: text.to_owned(),
        metadata: Map::new(),
    }
}

fn chunk_with(text: &str, metadata: Value) -> Chunk {
    Chunk {
        text: text.to_owned(),
        metadata: metadata.as_object().unwrap().clone(),
    }
}

fn system(request: &ModelRequest) -> String {
    request.messages[0].text()
}

fn prompt(request: &ModelRequest) -> String {
    request.messages.last().unwrap().text()
}

fn schema(request: &ModelRequest) -> Value {
    match &request.response_format {
        Some(ResponseFormat::Json { schema, .. }) => schema.clone(),
        other => panic!("no JSON response format: {other:?}"),
    }
}

fn answer(value: Value) -> ScriptedResponse {
    ScriptedResponse::text(value.to_string())
}

/// The requests whose system message starts with `instructions` (one extractor's calls).
fn calls_of(model: &ScriptedModel, instructions: &str) -> Vec<ModelRequest> {
    model
        .requests()
        .into_iter()
        .filter(|r| system(r).starts_with(instructions))
        .collect()
}

/// The first word of the chunk text inside a prompt (the texts below start with distinct
/// words, and the prompts end the chunk's context with its text).
fn which<'a>(prompt: &str, texts: &[&'a str]) -> &'a str {
    texts
        .iter()
        .find(|text| prompt.contains(*text))
        .copied()
        .unwrap_or_else(|| panic!("no chunk text in {prompt:?}"))
}

const TEXTS: [&str; 3] = [
    "Kestrels hover over open fields.",
    "Voles hide in tall grass.",
    "Towers make good nesting sites.",
];

fn first_word(text: &str) -> &str {
    text.split(' ').next().unwrap()
}

#[tokio::test]
async fn keywords_are_asked_in_mastras_prompt_and_joined_with_commas() {
    let model = ScriptedModel::from_fn(|request| {
        let word = first_word(which(&prompt(request), &TEXTS));
        answer(json!({"keywords": [word, " birds ", ""]}))
    });
    let options = ExtractOptions::new().keywords(KeywordsOptions::default().keywords(3));
    let chunks = extract(TEXTS.map(chunk).to_vec(), &options, &model)
        .await
        .unwrap();
    for (chunk, text) in chunks.iter().zip(TEXTS) {
        assert_eq!(chunk.text, text, "the text is left as it was");
        assert_eq!(
            chunk.metadata["excerptKeywords"],
            format!("{}, birds", first_word(text))
        );
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let sent = &requests[0];
    assert_eq!(
        prompt(sent),
        prompts::format(
            prompts::KEYWORDS_TEMPLATE,
            &[("context", TEXTS[0]), ("maxKeywords", "3")]
        )
    );
    assert!(prompt(sent).contains("extract up to 3 keywords from the text"));
    assert_eq!(
        system(sent),
        format!(
            "{} {}",
            prompts::KEYWORDS_INSTRUCTIONS,
            prompts::KEYWORDS_JSON
        )
    );
    let schema = schema(sent);
    assert_eq!(schema["required"], json!(["keywords"]));
    assert_eq!(schema["properties"]["keywords"]["maxItems"], 3);
}

#[tokio::test]
async fn questions_are_numbered_on_one_line() {
    let model = ScriptedModel::from_fn(|request| {
        let word = first_word(which(&prompt(request), &TEXTS));
        answer(json!({"questions": [format!("What about {word}?"), "Where\nexactly?"]}))
    });
    let options = ExtractOptions::new().questions(QuestionsOptions::default().questions(2));
    let chunks = extract(TEXTS.map(chunk).to_vec(), &options, &model)
        .await
        .unwrap();
    assert_eq!(
        chunks[1].metadata["questionsThisExcerptCanAnswer"],
        "1. What about Voles? 2. Where exactly?"
    );
    let sent = &model.requests()[0];
    assert!(system(sent).starts_with(prompts::QUESTIONS_INSTRUCTIONS));
    assert!(prompt(sent).contains("generate 2 questions this context can provide"));
    assert!(prompt(sent).contains(TEXTS[0]));
}

#[tokio::test]
async fn a_custom_template_gets_the_chunk_and_the_count() {
    let model = ScriptedModel::new().respond(answer(json!({"questions": ["Q?"]})));
    let options = ExtractOptions::new().questions(
        QuestionsOptions::default()
            .questions(3)
            .prompt_template("Ask {numQuestions} about: {context} {unknown}!"),
    );
    extract(vec![chunk("Falcons stoop.")], &options, &model)
        .await
        .unwrap();
    assert_eq!(
        prompt(&model.requests()[0]),
        "Ask 3 about: Falcons stoop. !"
    );
}

#[tokio::test]
async fn summaries_wire_each_chunk_to_its_neighbours() {
    let model = ScriptedModel::from_fn(|request| {
        let word = first_word(which(&prompt(request), &TEXTS));
        answer(json!({"summary": format!("About\n{word}.")}))
    });
    let options = ExtractOptions::new().summary(SummaryOptions::default().summaries([
        SummaryKind::Own,
        SummaryKind::Prev,
        SummaryKind::Next,
    ]));
    let chunks = extract(TEXTS.map(chunk).to_vec(), &options, &model)
        .await
        .unwrap();
    let summary = |i: usize, key: &str| chunks[i].metadata.get(key).cloned();
    let about = |word: &str| Some(json!(format!("About {word}.")));
    assert_eq!(summary(0, "sectionSummary"), about("Kestrels"));
    assert_eq!(summary(0, "prevSectionSummary"), None);
    assert_eq!(summary(0, "nextSectionSummary"), about("Voles"));
    assert_eq!(summary(1, "prevSectionSummary"), about("Kestrels"));
    assert_eq!(summary(1, "sectionSummary"), about("Voles"));
    assert_eq!(summary(1, "nextSectionSummary"), about("Towers"));
    assert_eq!(summary(2, "prevSectionSummary"), about("Voles"));
    assert_eq!(summary(2, "sectionSummary"), about("Towers"));
    assert_eq!(summary(2, "nextSectionSummary"), None);
    let sent = &model.requests()[0];
    assert!(system(sent).starts_with(prompts::SUMMARY_INSTRUCTIONS));
    assert!(prompt(sent).starts_with("Write a summary of the following."));
    assert!(prompt(sent).contains(TEXTS[0]));
}

#[tokio::test]
async fn only_the_summaries_some_chunk_gets_are_asked_for() {
    let model = ScriptedModel::from_fn(|request| {
        let word = first_word(which(&prompt(request), &TEXTS));
        answer(json!({"summary": word}))
    });
    let options =
        ExtractOptions::new().summary(SummaryOptions::default().summaries([SummaryKind::Prev]));
    let chunks = extract(TEXTS.map(chunk).to_vec(), &options, &model)
        .await
        .unwrap();
    assert_eq!(model.calls(), 2, "the last chunk's summary is nobody's");
    assert!(!chunks[0].metadata.contains_key("prevSectionSummary"));
    assert_eq!(chunks[1].metadata["prevSectionSummary"], "Kestrels");
    assert_eq!(chunks[2].metadata["prevSectionSummary"], "Voles");
    assert!(
        chunks
            .iter()
            .all(|c| !c.metadata.contains_key("sectionSummary"))
    );
}

/// A title model: a candidate names the chunk's first word, the combined title lists what it
/// was given.
fn title_model() -> ScriptedModel {
    ScriptedModel::from_fn(|request| {
        if system(request).starts_with(prompts::TITLE_NODE_INSTRUCTIONS) {
            let all = [TEXTS.as_slice(), &["Owls call at night."]].concat();
            let word = first_word(which(&prompt(request), &all));
            answer(json!({"title": format!(" {word} ")}))
        } else {
            let candidates = prompt(request).split(" \n").next().unwrap().to_owned();
            answer(json!({"title": format!("Title of {candidates}")}))
        }
    })
}

#[tokio::test]
async fn a_title_combines_the_candidates_of_a_documents_first_nodes_chunks() {
    let model = title_model();
    let mut chunks: Vec<Chunk> = TEXTS
        .iter()
        .map(|text| chunk_with(text, json!({"docId": "birds"})))
        .collect();
    chunks.push(chunk_with("Owls call at night.", json!({"docId": "owls"})));
    let options = ExtractOptions::new().title(TitleOptions::default().nodes(2));
    let chunks = extract(chunks, &options, &model).await.unwrap();
    for chunk in &chunks[..3] {
        assert_eq!(chunk.metadata["documentTitle"], "Title of Kestrels, Voles");
    }
    assert_eq!(chunks[3].metadata["documentTitle"], "Title of Owls");
    let candidates = calls_of(&model, prompts::TITLE_NODE_INSTRUCTIONS);
    assert_eq!(candidates.len(), 3, "two of birds' chunks, owls' one");
    assert!(candidates.iter().all(|r| !prompt(r).contains(TEXTS[2])));
    assert_eq!(
        prompt(&candidates[0]),
        prompts::format(
            prompts::TITLE_NODE_TEMPLATE,
            &[("context", &format!("docId: birds\n\n{}", TEXTS[0]))]
        )
    );
    let combined = calls_of(&model, prompts::TITLE_COMBINE_INSTRUCTIONS);
    assert_eq!(combined.len(), 2);
    assert_eq!(
        prompt(&combined[0]),
        prompts::format(
            prompts::TITLE_COMBINE_TEMPLATE,
            &[("context", "Kestrels, Voles")]
        )
    );
}

#[tokio::test]
async fn a_chunk_without_a_doc_id_is_its_own_document() {
    let model = title_model();
    let chunks = extract(
        TEXTS.map(chunk).to_vec(),
        &ExtractOptions::new().title(TitleOptions::default()),
        &model,
    )
    .await
    .unwrap();
    assert_eq!(chunks[0].metadata["documentTitle"], "Title of Kestrels");
    assert_eq!(chunks[2].metadata["documentTitle"], "Title of Towers");
    assert_eq!(
        model.calls(),
        6,
        "a candidate and a combined title per chunk"
    );
}

#[tokio::test]
async fn the_schema_extractor_writes_its_object_under_its_key_or_spread() {
    let product = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
        "required": ["name", "price"],
    });
    let model = ScriptedModel::from_fn(|request| {
        let word = first_word(which(&prompt(request), &TEXTS));
        answer(json!({"name": word, "price": 3}))
    });
    let under = ExtractOptions::new().schema(
        SchemaOptions::new(product.clone())
            .instructions("Extract the product.")
            .metadata_key("product"),
    );
    let chunks = extract(TEXTS.map(chunk).to_vec(), &under, &model)
        .await
        .unwrap();
    assert_eq!(
        chunks[1].metadata["product"],
        json!({"name": "Voles", "price": 3})
    );
    let sent = &model.requests()[0];
    assert_eq!(system(sent), "Extract the product.");
    assert_eq!(prompt(sent), TEXTS[0], "the chunk is the message");
    assert_eq!(schema(sent), product);

    let spread = ExtractOptions::new().schema(SchemaOptions::new(product));
    let chunks = extract(
        vec![chunk_with(TEXTS[2], json!({"source": "a.txt"}))],
        &spread,
        &model,
    )
    .await
    .unwrap();
    assert_eq!(
        Value::Object(chunks[0].metadata.clone()),
        json!({"source": "a.txt", "name": "Towers", "price": 3})
    );
    let sent = model.requests().pop().unwrap();
    assert_eq!(system(&sent), prompts::SCHEMA_INSTRUCTIONS);
    assert_eq!(prompt(&sent), format!("source: a.txt\n\n{}", TEXTS[2]));
}

#[tokio::test]
async fn an_answer_off_the_schema_is_an_invalid_output_naming_the_extractor() {
    let product =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let model = ScriptedModel::new().respond(answer(json!({"price": 3})));
    let err = extract(
        vec![chunk("x")],
        &ExtractOptions::new().schema(SchemaOptions::new(product)),
        &model,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &err,
            ExtractError::InvalidOutput { extractor: Extractor::Schema, chunk: 0, message }
                if message.contains("does not match the schema")
        ),
        "{err}"
    );

    let model = ScriptedModel::new().respond(ScriptedResponse::text("A summary in prose."));
    let err = extract(
        vec![chunk("x")],
        &ExtractOptions::new().summary(SummaryOptions::default()),
        &model,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &err,
            ExtractError::InvalidOutput { extractor: Extractor::Summary, message, .. }
                if message.contains("not valid JSON")
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_fenced_answer_is_accepted_as_structured_output_accepts_it() {
    let model = ScriptedModel::new().respond(ScriptedResponse::text(
        "```json\n{\"keywords\": [\"kestrel\"]}\n```",
    ));
    let chunks = extract(
        vec![chunk("Kestrels.")],
        &ExtractOptions::new().keywords(KeywordsOptions::default()),
        &model,
    )
    .await
    .unwrap();
    assert_eq!(chunks[0].metadata["excerptKeywords"], "kestrel");
}

#[tokio::test]
async fn a_model_error_names_the_extractor_and_the_chunk() {
    let model = ScriptedModel::from_fn(|request| {
        if prompt(request).contains(TEXTS[1]) {
            ScriptedResponse::error(ModelError::Scripted("the provider is down".into()))
        } else {
            answer(json!({"keywords": ["k"]}))
        }
    });
    let err = extract(
        TEXTS.map(chunk).to_vec(),
        &ExtractOptions::new().keywords(KeywordsOptions::default()),
        &model,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &err,
            ExtractError::Model {
                extractor: Extractor::Keywords,
                chunk: 1,
                source: ModelError::Scripted(_)
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("keywords extractor"), "{message}");
    assert!(message.contains("chunk 1"), "{message}");
}

#[tokio::test]
async fn extractors_run_in_mastras_order_each_seeing_the_metadata_before_it() {
    let model = ScriptedModel::from_fn(|request| {
        let system = system(request);
        if system.starts_with(prompts::SUMMARY_INSTRUCTIONS) {
            answer(json!({"summary": "Birds of prey."}))
        } else if system.starts_with(prompts::QUESTIONS_INSTRUCTIONS) {
            answer(json!({"questions": ["Which birds?"]}))
        } else {
            answer(json!({"keywords": ["birds"]}))
        }
    });
    let options = ExtractOptions::new()
        .keywords(KeywordsOptions::default())
        .questions(QuestionsOptions::default())
        .summary(SummaryOptions::default());
    let chunks = extract(
        vec![chunk_with(TEXTS[0], json!({"source": "birds.md"}))],
        &options,
        &model,
    )
    .await
    .unwrap();
    assert_eq!(
        Value::Object(chunks[0].metadata.clone()),
        json!({
            "source": "birds.md",
            "sectionSummary": "Birds of prey.",
            "questionsThisExcerptCanAnswer": "1. Which birds?",
            "excerptKeywords": "birds",
        })
    );
    let requests = model.requests();
    assert!(system(&requests[0]).starts_with(prompts::SUMMARY_INSTRUCTIONS));
    assert!(system(&requests[1]).starts_with(prompts::QUESTIONS_INSTRUCTIONS));
    assert!(system(&requests[2]).starts_with(prompts::KEYWORDS_INSTRUCTIONS));
    // The questions see the summary, as Mastra's prompt says they may.
    assert!(
        prompt(&requests[1])
            .contains("sectionSummary: Birds of prey.\nsource: birds.md\n\nKestrels hover"),
        "{}",
        prompt(&requests[1])
    );
}

#[tokio::test]
async fn a_blank_chunk_gets_empty_values_without_a_call() {
    let model = ScriptedModel::new();
    let chunks = extract(
        vec![chunk("  \n")],
        &ExtractOptions::new()
            .keywords(KeywordsOptions::default())
            .questions(QuestionsOptions::default())
            .summary(SummaryOptions::default())
            .title(TitleOptions::default()),
        &model,
    )
    .await
    .unwrap();
    assert_eq!(model.calls(), 0);
    assert_eq!(
        Value::Object(chunks[0].metadata.clone()),
        json!({"excerptKeywords": "", "questionsThisExcerptCanAnswer": "", "documentTitle": ""})
    );
}

/// A model that answers keywords after a pause, counting the calls in flight.
#[derive(Default)]
struct Counting {
    in_flight: AtomicUsize,
    most: AtomicUsize,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl LanguageModel for Counting {
    fn provider(&self) -> &str {
        "counting"
    }

    fn model_id(&self) -> &str {
        "counting"
    }

    async fn stream(&self, _request: ModelRequest) -> Result<ModelStream, ModelError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let events = vec![
            Ok(ModelEvent::TextDelta {
                text: json!({"keywords": ["k"]}).to_string(),
            }),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage::new(1, 1),
            }),
        ];
        Ok(futures::stream::iter(events).boxed())
    }
}

#[tokio::test]
async fn at_most_concurrency_calls_run_at_once() {
    for concurrency in [1, 3] {
        let model = Arc::new(Counting::default());
        let chunks: Vec<Chunk> = (0..9).map(|i| chunk(&format!("chunk {i}"))).collect();
        let options = ExtractOptions::new()
            .keywords(KeywordsOptions::default())
            .concurrency(concurrency);
        let chunks = extract(chunks, &options, model.as_ref()).await.unwrap();
        assert_eq!(chunks.len(), 9);
        assert_eq!(model.calls.load(Ordering::SeqCst), 9);
        assert_eq!(
            model.most.load(Ordering::SeqCst),
            concurrency,
            "concurrency {concurrency}"
        );
    }
}

#[test]
fn extraction_can_run_on_a_spawned_task() {
    fn send<T: Send>(_: &T) {}
    let model = ScriptedModel::new();
    let options = ExtractOptions::new();
    send(&extract(Vec::new(), &options, &model));
    let document = Document::from_text("x");
    let chunking = ChunkOptions::recursive();
    send(&document.chunk_and_extract(&chunking, &model));
}

#[tokio::test]
async fn chunk_and_extract_cuts_then_extracts_as_mastras_chunk_does() {
    let model = ScriptedModel::from_fn(|request| {
        let word = first_word(which(&prompt(request), &TEXTS));
        answer(json!({"keywords": [word.to_lowercase()]}))
    });
    let options = ChunkOptions::from_json(&json!({
        "strategy": "sentence",
        "maxSize": 40,
        "extract": {"keywords": {"keywords": 2}},
    }))
    .unwrap();
    let document = Document::from_text(TEXTS.join(" ")).with("source", "birds.txt");
    let chunks = document.chunk_and_extract(&options, &model).await.unwrap();
    assert_eq!(chunks.len(), 3);
    for (chunk, text) in chunks.iter().zip(TEXTS) {
        assert_eq!(chunk.text, text);
        assert_eq!(chunk.metadata["source"], "birds.txt");
        assert_eq!(
            chunk.metadata["excerptKeywords"],
            first_word(text).to_lowercase()
        );
    }
    assert!(prompt(&model.requests()[0]).contains("source: birds.txt\n\nKestrels hover"));

    // Without `extract`, the chunks `chunk` gives, and no call.
    let plain = ChunkOptions::sentence(40);
    let quiet = ScriptedModel::new();
    assert_eq!(
        document.chunk_and_extract(&plain, &quiet).await.unwrap(),
        document.chunk(&plain).unwrap()
    );
    assert_eq!(quiet.calls(), 0);
}

#[test]
fn chunk_refuses_extract_which_needs_a_model() {
    let options = ChunkOptions::sentence(40).extract(ExtractOptions::new());
    let err = Document::from_text("Kestrels hover.")
        .chunk(&options)
        .unwrap_err();
    assert!(
        matches!(&err, ChunkError::InvalidOptions { message, .. } if message.contains("chunk_and_extract")),
        "{err}"
    );
}

#[test]
fn the_json_options_are_mastras() {
    let options = ExtractOptions::from_json(&json!({
        "title": {"nodes": 2, "nodeTemplate": "T {context}", "combineTemplate": "C {context}"},
        "summary": {"summaries": ["self", "prev", "next"], "promptTemplate": "S {context}"},
        "questions": {"questions": 3, "promptTemplate": "{numQuestions} Q {context}", "embeddingOnly": true},
        "keywords": true,
        "schema": {"schema": {"type": "object"}, "instructions": "I", "metadataKey": "product"},
        "concurrency": 8,
    }))
    .unwrap();
    let expected = ExtractOptions::new()
        .title(
            TitleOptions::default()
                .nodes(2)
                .node_template("T {context}")
                .combine_template("C {context}"),
        )
        .summary(
            SummaryOptions::default()
                .summaries([SummaryKind::Own, SummaryKind::Prev, SummaryKind::Next])
                .prompt_template("S {context}"),
        )
        .questions(
            QuestionsOptions::default()
                .questions(3)
                .prompt_template("{numQuestions} Q {context}"),
        )
        .keywords(KeywordsOptions::default())
        .schema(
            SchemaOptions::new(json!({"type": "object"}))
                .instructions("I")
                .metadata_key("product"),
        )
        .concurrency(8);
    assert_eq!(options.title, expected.title);
    assert_eq!(options.summary, expected.summary);
    assert_eq!(options.keywords, expected.keywords);
    assert_eq!(options.schema, expected.schema);
    assert_eq!(options.concurrency, 8);
    let questions = options.questions.unwrap();
    assert!(questions.embedding_only);
    assert_eq!(questions.questions, 3);

    // Mastra's defaults; `false` is off.
    let defaults = ExtractOptions::from_json(&json!({
        "title": true, "summary": true, "questions": true, "keywords": false,
    }))
    .unwrap();
    assert_eq!(defaults.title.unwrap().nodes, 5);
    assert_eq!(defaults.summary.unwrap().summaries, [SummaryKind::Own]);
    assert_eq!(defaults.questions.unwrap().questions, 5);
    assert_eq!(defaults.keywords, None);
    assert_eq!(defaults.concurrency, 4);

    // Through `chunk()`'s options.
    let chunking = ChunkOptions::from_json(&json!({
        "strategy": "recursive", "extract": {"keywords": {"keywords": 3}},
    }))
    .unwrap();
    assert_eq!(
        chunking,
        ChunkOptions::recursive()
            .extract(ExtractOptions::new().keywords(KeywordsOptions::default().keywords(3)))
    );
}

#[test]
fn a_bad_option_is_refused_by_its_name() {
    let cases = [
        (json!({"title": {"nodes": 0}}), "title.nodes"),
        (json!({"title": 3}), "title"),
        (
            json!({"title": {"nodeTemplate": "no chunk here"}}),
            "title.nodeTemplate",
        ),
        (
            json!({"title": {"combineTemplate": "{contexts}"}}),
            "title.combineTemplate",
        ),
        (json!({"summary": {"summaries": []}}), "summary.summaries"),
        (json!({"summary": {"summaries": ["later"]}}), "summary"),
        (
            json!({"summary": {"promptTemplate": "Sum up."}}),
            "summary.promptTemplate",
        ),
        (
            json!({"questions": {"questions": 0}}),
            "questions.questions",
        ),
        (json!({"questions": {"questions": -1}}), "questions"),
        (
            json!({"questions": {"llm": "openai/gpt-4o"}}),
            "questions.llm",
        ),
        (json!({"keywords": {"keywords": 0}}), "keywords.keywords"),
        (json!({"keywords": {"count": 3}}), "keywords"),
        (
            json!({"keywords": {"promptTemplate": "Keywords!"}}),
            "keywords.promptTemplate",
        ),
        (json!({"schema": true}), "schema"),
        (json!({"schema": {"instructions": "x"}}), "schema"),
        (json!({"schema": {"schema": "object"}}), "schema.schema"),
        (json!({"schema": {"schema": {"type": 12}}}), "schema.schema"),
        (
            json!({"schema": {"schema": {"type": "string"}}}),
            "schema.metadataKey",
        ),
        (
            json!({"schema": {"schema": {"type": "object"}, "metadataKey": ""}}),
            "schema.metadataKey",
        ),
        (json!({"concurrency": 0}), "concurrency"),
        (json!({"tags": true}), "tags"),
        (json!(["title"]), "extract"),
    ];
    for (json, name) in cases {
        match ExtractOptions::from_json(&json) {
            Err(ExtractError::InvalidOptions { option, message }) => {
                assert_eq!(option, name, "{json}: {message}");
            }
            other => panic!("{json}: {other:?}"),
        }
    }
    // A schema with another type is fine under a key.
    assert!(
        ExtractOptions::from_json(&json!({
            "schema": {"schema": {"type": "string"}, "metadataKey": "kind"}
        }))
        .is_ok()
    );
    // Through `chunk()`'s options, the chunking error names the extract option.
    let err = ChunkOptions::from_json(&json!({
        "strategy": "recursive", "extract": {"title": {"nodes": 0}},
    }))
    .unwrap_err();
    assert!(err.to_string().contains("'title.nodes'"), "{err}");
}

#[tokio::test]
async fn options_built_in_rust_are_checked_before_any_call() {
    let model = ScriptedModel::new();
    let err = extract(
        vec![chunk("x")],
        &ExtractOptions::new()
            .keywords(KeywordsOptions::default().keywords(0))
            .concurrency(2),
        &model,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ExtractError::InvalidOptions { option, .. } if option == "keywords.keywords"),
        "{err}"
    );
    let err = Document::from_text("x")
        .chunk_and_extract(
            &ChunkOptions::recursive().extract(ExtractOptions::new().concurrency(0)),
            &model,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ExtractError::InvalidOptions { option, .. } if option == "concurrency"),
        "{err}"
    );
    assert_eq!(model.calls(), 0);
}
