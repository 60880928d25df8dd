//! The committed JSON Schema of the report format, and validation against it.
//!
//! `reports/schema/report.schema.json` is hand-written (draft 2020-12) so that it
//! can carry units and descriptions; it is compiled into the crate, and the tests
//! validate reports built by code against it. Because every object in it sets
//! `additionalProperties: false` and lists all its fields as `required`, a field
//! added to or removed from the Rust types without updating the schema fails
//! those tests. Loadgen's integration tests call [`validate_against_schema`] on
//! its real output.

use std::sync::OnceLock;

use serde_json::Value;

/// The schema text, as committed.
pub const REPORT_SCHEMA: &str = include_str!("../schema/report.schema.json");

/// Validates a JSON document against the report schema.
///
/// Returns every violation as `"<instance path>: <message>"`, or the reason the
/// schema itself could not be compiled.
pub fn validate_against_schema(json: &Value) -> Result<(), Vec<String>> {
    // Compiling the schema takes longer than validating one report; do it once.
    static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    let validator = VALIDATOR
        .get_or_init(|| {
            let schema: Value = serde_json::from_str(REPORT_SCHEMA)
                .map_err(|e| format!("report schema is not JSON: {e}"))?;
            jsonschema::draft202012::new(&schema)
                .map_err(|e| format!("report schema does not compile: {e}"))
        })
        .as_ref()
        .map_err(|e| vec![e.clone()])?;
    let errors: Vec<String> = validator
        .iter_errors(json)
        .map(|error| format!("{}: {}", error.instance_path(), error))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_valid_draft_2020_12() {
        let schema: Value = serde_json::from_str(REPORT_SCHEMA).unwrap();
        jsonschema::meta::validate(&schema).unwrap();
    }

    #[test]
    fn rejects_wrong_documents() {
        let errors =
            validate_against_schema(&serde_json::json!({"schema_version": 2})).unwrap_err();
        assert!(errors
            .iter()
            .any(|e| e.contains("schema_version") || e.contains("const")));
        assert!(validate_against_schema(&serde_json::json!([])).is_err());
    }
}
