//! Schemas the grammar cannot enforce, or that are invalid, fail the request with a typed
//! error (no model needed to reject them, but `generate` needs an engine).

use kestrel_llama::{GenerateError, GenerateRequest, ToolChoice, ToolSpec};
use serde_json::{Value, json};

use super::{currency_tool, engine, tools, user};

#[test]
fn unsupported_and_invalid_schemas_are_errors_not_crashes() {
    let Some(engine) = engine("unsupported_and_invalid_schemas_are_errors_not_crashes") else {
        return;
    };
    let with_tool = |parameters: Value| GenerateRequest {
        tools: vec![ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters,
            auxiliary: false,
        }],
        ..user("hi")
    };
    match engine.generate(with_tool(
        json!({"type": "object", "properties": {"x": {"not": {"type": "null"}}}}),
    )) {
        Err(GenerateError::UnsupportedSchema { feature, path, .. }) => {
            assert_eq!(feature, "not");
            assert_eq!(path, "t#/properties/x");
        }
        other => panic!("expected UnsupportedSchema, got {other:?}"),
    }
    // The currency tool as written bounds a number: not enforceable.
    let request = GenerateRequest {
        tools: vec![currency_tool()],
        ..user("hi")
    };
    assert!(matches!(
        engine.generate(request),
        Err(GenerateError::UnsupportedSchema { feature, .. }) if feature == "exclusiveMinimum"
    ));
    // Structured output with an unsupported keyword.
    let request = GenerateRequest {
        response_schema: Some(json!({"type": "array", "uniqueItems": true})),
        ..user("hi")
    };
    assert!(matches!(
        engine.generate(request),
        Err(GenerateError::UnsupportedSchema { feature, .. }) if feature == "uniqueItems"
    ));
    // Schemas llama.cpp's converter throws on become errors.
    for bad in [
        json!({"type": "spaceship"}),
        json!({"enum": []}),
        json!({"type": "string", "pattern": "^(ab$"}),
        json!({"type": "array", "minItems": -1}),
        json!({"type": "object", "properties": 3}),
    ] {
        let result = engine.generate(GenerateRequest {
            response_schema: Some(bad.clone()),
            ..user("hi")
        });
        assert!(
            matches!(
                result,
                Err(GenerateError::InvalidSchema { .. } | GenerateError::UnsupportedSchema { .. })
            ),
            "{bad}: {result:?}"
        );
    }
    // A grammar llama.cpp refuses to build (too many repetitions).
    let result = engine.generate(GenerateRequest {
        response_schema: Some(
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 20000}),
        ),
        ..user("hi")
    });
    assert!(
        matches!(result, Err(GenerateError::Grammar(_))),
        "{result:?}"
    );
    // Inconsistent requests.
    assert!(matches!(
        engine.generate(GenerateRequest {
            tool_choice: ToolChoice::Tool("nope".into()),
            tools: tools(),
            ..user("hi")
        }),
        Err(GenerateError::InvalidRequest(_))
    ));
    assert!(matches!(
        engine.generate(GenerateRequest {
            temperature: Some(-1.0),
            ..user("hi")
        }),
        Err(GenerateError::InvalidRequest(_))
    ));
}
