//! Spec 9: "usage maps to usage (provider, model and token accounting)". A generation-1 usage
//! frame counts tokens from 0 (its schema's `count`), so a `usage` event the host reports with a
//! negative count is accounting no valid frame carried: a host that added up a frame it should
//! have refused or skipped (Multica sums whatever counts arrive). The driver reply may carry any
//! integer (schemas/driver/reply.schema.json), so this is where it is judged, on the usage rule.

use super::{RunEvidence, Violation};
use crate::verdict::RULE_USAGE_EVENT;
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    evidence
        .events
        .iter()
        .enumerate()
        .filter(|(_, event)| event.get("type").and_then(Value::as_str) == Some("usage"))
        .flat_map(|(index, event)| {
            negative_counts(event).map(move |(name, count)| (index, name, count))
        })
        .map(|(index, name, count)| {
            Violation::new(
                RULE_USAGE_EVENT,
                format!(
                    "usage event {index} reports {name} {count}: a token count is never \
                     negative (a usage frame counts from 0; one that does not is invalid, not \
                     accounting to report or add up)"
                ),
            )
        })
        .collect()
}

/// The members of a usage event's `usage` that are negative integers, by name.
fn negative_counts(event: &Value) -> impl Iterator<Item = (String, i64)> + '_ {
    event
        .get("usage")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, value)| Some((name.clone(), value.as_i64().filter(|n| *n < 0)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn negative_counts_are_named_and_the_rest_pass() {
        let summed = json!({"type": "usage", "provider": "p", "model": "m",
            "usage": {"input_tokens": -5, "output_tokens": 0, "cache_read_tokens": -1}});
        let found: Vec<(String, i64)> = negative_counts(&summed).collect();
        assert_eq!(
            found,
            vec![
                ("cache_read_tokens".to_string(), -1),
                ("input_tokens".to_string(), -5)
            ]
        );
        let fine = json!({"type": "usage", "usage": {"input_tokens": 3, "output_tokens": 1}});
        assert_eq!(negative_counts(&fine).count(), 0);
        assert_eq!(negative_counts(&json!({"type": "usage"})).count(), 0);
    }

    /// The reply carries what the host computed: a negative count is a valid reply (judged here,
    /// on the usage rule), a count that is no integer is not.
    #[test]
    fn the_reply_schema_takes_a_negative_count_but_not_a_fraction() {
        let reply = |usage: Value| {
            json!({"v": 1, "type": "event", "id": "r0", "event": {"type": "usage",
                   "provider": "p", "model": "m", "usage": usage}})
        };
        let valid =
            |usage| dsh_protocol::schema::is_valid("driver/reply.schema.json", &reply(usage));
        assert!(valid(
            json!({"input_tokens": -5, "output_tokens": 3, "cache_read_tokens": -2})
        ));
        assert!(!valid(json!({"input_tokens": 1.5, "output_tokens": 3})));
        assert!(!valid(json!({"output_tokens": 3})));
    }
}
