//! The filter language: the evaluator against the hand-written cases, and refusals.

use kestrel_rag::Filter;
use kestrel_rag::testing::{FILTER_CASES, expected_ids, filter_documents};
use serde_json::json;

#[test]
fn the_evaluator_selects_what_the_rules_say() {
    let documents = filter_documents();
    let mut failures = Vec::new();
    for (filter, expected) in FILTER_CASES {
        let parsed = Filter::from_json_str(filter).unwrap();
        let got: Vec<String> = documents
            .iter()
            .filter(|(_, metadata)| parsed.matches(metadata.as_object().unwrap()))
            .map(|(id, _)| (*id).to_owned())
            .collect();
        if got != expected_ids(expected) {
            failures.push(format!("{filter}: got {got:?}, expected {expected:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bad_filters_are_refused_saying_where_and_why() {
    let cases = [
        (json!([1, 2]), "$", "a filter is a JSON object"),
        (json!({"$gt": 1}), "$.$gt", "is a field operator"),
        (
            json!({"$where": "1"}),
            "$.$where",
            "unsupported operator $where",
        ),
        (
            json!({"a": {"$foo": 1}}),
            "$.a.$foo",
            "unsupported operator $foo",
        ),
        (
            json!({"a": {"$and": [{"b": 1}]}}),
            "$.a.$and",
            "cannot be used under a field",
        ),
        (
            json!({"a": {"$eq": [1]}}),
            "$.a.$eq",
            "takes a string, number, boolean or null",
        ),
        (
            json!({"a": {"$gt": true}}),
            "$.a.$gt",
            "compares with a number or a string",
        ),
        (json!({"a": {"$in": [[1]]}}), "$.a.$in[0]", "takes a string"),
        (
            json!({"a": {"$elemMatch": 3}}),
            "$.a.$elemMatch",
            "requires an object",
        ),
        (
            json!({"a": {"$exists": 1}}),
            "$.a.$exists",
            "takes true or false",
        ),
        (
            json!({"a": {"$regex": "("}}),
            "$.a.$regex",
            "not a valid regular expression",
        ),
        (
            json!({"a": {"$regex": "x", "$options": "g"}}),
            "$.a.$regex",
            "unknown $options flag",
        ),
        (
            json!({"a": {"$options": "i"}}),
            "$.a.$options",
            "$options needs $regex",
        ),
        (json!({"a": {"$not": {}}}), "$.a.$not", "cannot be empty"),
        (json!({"$not": {}}), "$.$not", "cannot be empty"),
        (json!({"$or": [1]}), "$.$or[0]", "takes filters"),
        (json!({"$and": "x"}), "$.$and", "takes a list of filters"),
        (json!({"a": {}}), "$.a", "an empty condition"),
        (json!({"a": {"$eq": 1, "b": 2}}), "$.a", "mixes operators"),
        (json!({"a..b": 1}), "$.a..b", "not a valid field name"),
        (json!({"a\"b": 1}), "$.a\"b", "not a valid field name"),
    ];
    for (filter, path, message) in cases {
        let err = Filter::parse(filter.clone()).unwrap_err();
        assert_eq!(err.path, path, "{filter}: {err}");
        assert!(err.message.contains(message), "{filter}: {err}");
    }
}

#[test]
fn filters_are_bounded() {
    let wide: Vec<i64> = (0..2_000).collect();
    let err = Filter::parse(json!({"a": {"$in": wide}})).unwrap_err();
    assert!(err.message.contains("more than 1000 terms"), "{err}");
    let mut deep = json!({"a": 1});
    for _ in 0..40 {
        deep = json!({"$and": [deep]});
    }
    let err = Filter::parse(deep).unwrap_err();
    assert!(err.message.contains("nests deeper"), "{err}");
    let long_path = vec!["x"; 20].join(".");
    assert!(Filter::parse(json!({ long_path: 1 })).is_err());
}

#[test]
fn filters_round_trip_through_serde() {
    let filter: Filter = serde_json::from_value(json!({"a": {"$gt": 1}, "b": "x"})).unwrap();
    assert_eq!(
        serde_json::to_value(&filter).unwrap(),
        json!({"a": {"$gt": 1}, "b": "x"})
    );
    assert!(serde_json::from_value::<Filter>(json!({"$gt": 1})).is_err());
    assert!(Filter::parse(json!(null)).unwrap().is_empty());
    assert!(Filter::parse(json!({})).unwrap().is_empty());
    assert!(Filter::from_json_str("{not json").is_err());
}
